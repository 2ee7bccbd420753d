/*
 * fuzz_sets.h — shared by the fuzz targets: lines of the input that start
 * with "#set " (a YAML comment, so the parse itself is unaffected) become
 * override strings, which fuzzes the override parser too.
 */
#ifndef KB_FUZZ_SETS_H
#define KB_FUZZ_SETS_H

#include <stdlib.h>
#include <string.h>

#define FUZZ_MAX_SETS 8

/* Copies up to FUZZ_MAX_SETS "#set ..." lines into sets[] (NUL-terminated,
 * malloc'd; free with fuzz_sets_free); returns how many. */
static inline size_t fuzz_sets_collect(const char *text, size_t size, char **sets)
{
    size_t n = 0;
    for (size_t i = 0; i < size && n < FUZZ_MAX_SETS; i++) {
        if ((i == 0 || text[i - 1] == '\n') && size - i > 5 && !memcmp(text + i, "#set ", 5)) {
            size_t end = i + 5;
            while (end < size && text[end] != '\n' && text[end] != '\0')
                end++;
            char *s = malloc(end - i - 4);
            if (!s) break;
            memcpy(s, text + i + 5, end - i - 5);
            s[end - i - 5] = '\0';
            sets[n++] = s;
        }
    }
    return n;
}

static inline void fuzz_sets_free(char **sets, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(sets[i]);
}

#endif
