/*
 * files.c — see files.h.
 */
#include "support/files.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *kb_test_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

uint64_t kb_test_trace_ps(const char *rec, const char *field)
{
    char key[16];
    snprintf(key, sizeof key, "\"%s\":", field);
    const char *v = strstr(rec, key);
    cr_assert_not_null(v, "%s in %.200s", field, rec);
    unsigned long long us, frac;
    cr_assert_eq(sscanf(v + strlen(key), "%llu.%6llu", &us, &frac), 2, "%.200s", rec);
    return (uint64_t)us * 1000000 + frac;
}

void kb_test_fuzz_corpus(const char *dir, kb_test_fuzz_fn fn, int min_files)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        char *buf = kb_test_slurp(path, &len);
        cr_assert_eq(fn((const uint8_t *)buf, len), 0, "%s", path);
        free(buf);
        files++;
    }
    closedir(d);
    cr_assert_geq(files, min_files);
}

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

void kb_test_fuzz_mutations(const char *path, uint64_t seed, int rounds, kb_test_fuzz_fn fn)
{
    static const char special[] = ":-{}[],#&*!|>'\"%@`\t\n x0.9";
    size_t len;
    char *orig = kb_test_slurp(path, &len);
    char *buf = malloc(len + 64);
    cr_assert_not_null(buf);
    for (int round = 0; round < rounds; round++) {
        memcpy(buf, orig, len);
        size_t n = len;
        int edits = 1 + (int)(next(&seed) % 4);
        for (int k = 0; k < edits && n > 1; k++) {
            size_t at = next(&seed) % n;
            switch (next(&seed) % 4) {
            case 0: /* replace with a YAML-significant character */
                buf[at] = special[next(&seed) % (sizeof special - 1)];
                break;
            case 1: /* delete */
                memmove(buf + at, buf + at + 1, n - at - 1);
                n--;
                break;
            case 2: /* insert */
                memmove(buf + at + 1, buf + at, n - at);
                buf[at] = special[next(&seed) % (sizeof special - 1)];
                n++;
                break;
            default: /* truncate */
                n = at + 1;
                break;
            }
        }
        cr_assert_eq(fn((const uint8_t *)buf, n), 0, "mutation round %d", round);
    }
    free(buf);
    free(orig);
}
