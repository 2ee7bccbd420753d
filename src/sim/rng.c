/*
 * rng.c — reproducible random streams: xoshiro256** seeded by splitmix64.
 *
 * A stream is fully determined by (seed, stream id): processes use their
 * spawn index as the stream id, so a run is reproducible whatever the
 * interleaving of draws between processes. Cost: a few ns per draw; exp()
 * adds one log().
 */
#include <math.h>

#include "sim/sim.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void kb__rng_seed(kb__rng *rng, uint64_t seed, uint64_t stream)
{
    /* Mix the stream id through its own splitmix step so that nearby
     * (seed, stream) pairs start far apart. */
    uint64_t s = stream;
    uint64_t x = seed ^ splitmix64(&s);
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&x);
}

uint64_t kb__rng_u64(kb__rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double kb__rng_uniform(kb__rng *rng)
{
    return (double)(kb__rng_u64(rng) >> 11) * 0x1.0p-53;
}

double kb__rng_exp(kb__rng *rng, double mean)
{
    /* u in (0, 1] (53 bits, exact), so the log is finite; log() is
     * cheaper than log1p() and loses nothing here. */
    double u = (double)((kb__rng_u64(rng) >> 11) + 1) * 0x1.0p-53;
    return -mean * log(u);
}

uint64_t kb__rng_below(kb__rng *rng, uint64_t n)
{
    if (n == 0) return 0;
    /* Lemire's multiply-shift with rejection of the biased low range. */
    unsigned __int128 m = (unsigned __int128)kb__rng_u64(rng) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = -n % n;
        while (low < threshold) {
            m = (unsigned __int128)kb__rng_u64(rng) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}
