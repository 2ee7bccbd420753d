/*
 * support/files.h — test helpers for files and fuzz entry points.
 */
#ifndef KB_TESTS_SUPPORT_FILES_H
#define KB_TESTS_SUPPORT_FILES_H

#include <stddef.h>
#include <stdint.h>

/* The whole file, NUL-terminated (malloc'd); *len = its size. Fails the test
 * when the file cannot be read. */
char *kb_test_slurp(const char *path, size_t *len);

/* Field `field` ("ts", "dur") of a trace record, whose values are
 * microseconds with six decimals, in picoseconds. Fails the test when the
 * record has no such field. */
uint64_t kb_test_trace_ps(const char *rec, const char *field);

typedef int (*kb_test_fuzz_fn)(const uint8_t *data, size_t size);

/* Runs fn over every file of dir (asserting it returns 0); fails the test
 * when dir holds fewer than min_files. */
void kb_test_fuzz_corpus(const char *dir, kb_test_fuzz_fn fn, int min_files);

/* Runs fn over `rounds` deterministic mutations of the file at path: 1-4 edits
 * each of replace / delete / insert of a YAML-significant character, or
 * truncation, driven by a xorshift stream seeded with `seed`. */
void kb_test_fuzz_mutations(const char *path, uint64_t seed, int rounds, kb_test_fuzz_fn fn);

#endif
