/*
 * The fuzz target's entry function must survive its corpus and a few
 * hundred deterministic mutations of configs/topology.yaml (byte flips,
 * deletions, insertions of YAML-significant characters, truncations).
 * Errors are fine; crashes, leaks and UB (under the sanitizer build) fail.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../fuzz/fuzz_config.c"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

Test(config_fuzz, corpus_files_do_not_crash)
{
    const char *dir = KB_SOURCE_DIR "/fuzz/corpus/config";
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        char *buf = slurp(path, &len);
        cr_assert_eq(LLVMFuzzerTestOneInput((const uint8_t *)buf, len), 0);
        free(buf);
        files++;
    }
    closedir(d);
    cr_assert_geq(files, 10);
}

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

Test(config_fuzz, mutations_of_the_default_file_do_not_crash)
{
    size_t len;
    char *orig = slurp(KB_SOURCE_DIR "/configs/topology.yaml", &len);
    static const char special[] = ":-{}[],#&*!|>'\"%@`\t\n x0.9";
    char *buf = malloc(len + 64);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < 300; round++) {
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
        cr_assert_eq(LLVMFuzzerTestOneInput((const uint8_t *)buf, n), 0);
    }
    free(buf);
    free(orig);
}
