/* Reading the environment. Every variable the library reads goes through these functions, so
 * that a value the library does not understand is never silent: it is warned about once per
 * process (at warn, which is the default log threshold) and the variable's default is used.
 * An unset or empty variable is the default, without a word. */
#ifndef JITOPS_COMMON_ENV_H
#define JITOPS_COMMON_ENV_H

#include <stddef.h>
#include <stdint.h>

/* One accepted word of a variable and what it means. Words compare case-insensitively. */
typedef struct jitops__env_word {
  const char *word;
  int value;
} jitops__env_word;

/* 1 and the word's value in *value when `text` is one of `words`; 0 otherwise. */
int jitops__env_word_lookup(const char *text, const jitops__env_word *words, size_t count,
                            int *value);

/* The value of the word $name holds, `fallback` when it is unset or empty, and `fallback`
 * with a warning that lists the words when it holds another. */
int jitops__env_word_value(const char *name, const jitops__env_word *words, size_t count,
                           int fallback);

/* A switch: 1/on/true/yes or 0/off/false/no, else `fallback` (with a warning when set). */
int jitops__env_flag(const char *name, int fallback);

/* Which byte counts a variable takes. */
typedef enum jitops__size_rule {
  JITOPS__SIZE_ZERO_OR_MORE = 0, /* 0 and up */
  JITOPS__SIZE_LIMIT = 1         /* 1 and up, or a negative count for no limit (returned as -1) */
} jitops__size_rule;

/* A byte count (see jitops__parse_size), `fallback` when unset or empty, and `fallback` with
 * a warning when not understood or outside `rule`. */
int64_t jitops__env_size(const char *name, int64_t fallback, jitops__size_rule rule);

/* A whole decimal number in [min, max], `fallback` when unset or empty, and `fallback` with a
 * warning (naming `expected`) when not understood or outside the range. */
int64_t jitops__env_integer(const char *name, int64_t fallback, int64_t min, int64_t max,
                            const char *expected);

/* Parses a byte count: decimal digits, optionally signed, then optionally one binary suffix
 * K, M, G or T (1K = 1024 bytes), which may be followed by "iB" or "B" ("512M", "1GiB",
 * "64KB"), in any case. 1 and *out on success; 0 when malformed or beyond INT64_MAX. */
int jitops__parse_size(const char *text, int64_t *out);

/* Warns, once per process and variable, that $name holds `value`, which the library does not
 * understand; `expected` says what it would have understood. */
void jitops__env_warn(const char *name, const char *value, const char *expected);

#endif
