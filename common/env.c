/* Environment variables: their grammar, and one warning per variable that holds a value
 * the library does not understand. */
#include "common/env.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"

/* The variables already warned about. The library reads a handful of variables, so a short
 * list is enough; past its end every warning is given (never fewer than one). */
enum { WARNED_MAX = 16, EXPECTED_BYTES = 256 };
static pthread_mutex_t warned_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *warned[WARNED_MAX];
static size_t warned_count;

/* 1 the first time `name` is seen (names are string literals: compared by content). */
static int first_warning(const char *name) {
  pthread_mutex_lock(&warned_lock);
  int first = 1;
  for (size_t i = 0; i < warned_count && first; ++i)
    first = strcmp(warned[i], name) != 0;
  if (first && warned_count < WARNED_MAX)
    warned[warned_count++] = name;
  pthread_mutex_unlock(&warned_lock);
  return first;
}

void jitops__env_warn(const char *name, const char *value, const char *expected) {
  if (first_warning(name))
    jitops__log(JITOPS__LOG_WARN, "%s=%s is not understood (expected %s): using the default", name,
                value, expected);
}

static const char *env_value(const char *name) {
  const char *value = getenv(name);
  return value != NULL && value[0] != 0 ? value : NULL;
}

/* "a, b or c" from the words, for a warning. */
static void list_words(const jitops__env_word *words, size_t count, char *out, size_t size) {
  size_t used = 0;
  out[0] = 0;
  for (size_t i = 0; i < count && used < size; ++i) {
    const char *separator = i == 0 ? "" : i + 1 == count ? " or " : ", ";
    used += (size_t)snprintf(out + used, size - used, "%s%s", separator, words[i].word);
  }
}

int jitops__env_word_lookup(const char *text, const jitops__env_word *words, size_t count,
                            int *value) {
  for (size_t i = 0; i < count; ++i)
    if (strcasecmp(text, words[i].word) == 0) {
      *value = words[i].value;
      return 1;
    }
  return 0;
}

int jitops__env_word_value(const char *name, const jitops__env_word *words, size_t count,
                           int fallback) {
  const char *value = env_value(name);
  int meaning = fallback;
  if (value == NULL || jitops__env_word_lookup(value, words, count, &meaning))
    return meaning;
  char expected[EXPECTED_BYTES];
  list_words(words, count, expected, sizeof expected);
  jitops__env_warn(name, value, expected);
  return fallback;
}

int jitops__env_flag(const char *name, int fallback) {
  static const jitops__env_word words[] = {{"1", 1},    {"0", 0},     {"on", 1},  {"off", 0},
                                           {"true", 1}, {"false", 0}, {"yes", 1}, {"no", 0}};
  return jitops__env_word_value(name, words, sizeof words / sizeof words[0], fallback);
}

/* The multiplier of a size suffix ("", "K", "MiB", "gb"...), 0 when it is none. */
static int64_t suffix_multiplier(const char *suffix) {
  static const char units[] = "KMGT";
  if (suffix[0] == 0)
    return 1;
  const char *unit = strchr(units, toupper((unsigned char)suffix[0]));
  if (unit == NULL)
    return 0;
  const char *rest = suffix + 1;
  if (rest[0] != 0 && strcasecmp(rest, "B") != 0 && strcasecmp(rest, "iB") != 0)
    return 0;
  return (int64_t)1 << (10 * (unit - units + 1));
}

int jitops__parse_size(const char *text, int64_t *out) {
  const char *p = text;
  int negative = *p == '-';
  if (*p == '-' || *p == '+')
    ++p;
  if (!isdigit((unsigned char)*p))
    return 0;
  int64_t digits = 0;
  for (; isdigit((unsigned char)*p); ++p) {
    if (digits > (INT64_MAX - 9) / 10)
      return 0;
    digits = digits * 10 + (*p - '0');
  }
  int64_t multiplier = suffix_multiplier(p);
  if (multiplier == 0 || digits > INT64_MAX / multiplier)
    return 0;
  *out = negative ? -(digits * multiplier) : digits * multiplier;
  return 1;
}

int64_t jitops__env_size(const char *name, int64_t fallback, jitops__size_rule rule) {
  const char *value = env_value(name);
  if (value == NULL)
    return fallback;
  int64_t size = 0;
  int parsed = jitops__parse_size(value, &size);
  if (parsed && rule == JITOPS__SIZE_ZERO_OR_MORE && size >= 0)
    return size;
  if (parsed && rule == JITOPS__SIZE_LIMIT && size != 0)
    return size < 0 ? -1 : size;
  jitops__env_warn(name, value,
                   rule == JITOPS__SIZE_LIMIT
                       ? "a size such as 512M or 1G, with a binary suffix K, M, G or T, or -1 "
                         "for no limit"
                       : "a size such as 0, 512M or 1G, with a binary suffix K, M, G or T");
  return fallback;
}

int64_t jitops__env_integer(const char *name, int64_t fallback, int64_t min, int64_t max,
                            const char *expected) {
  const char *value = env_value(name);
  if (value == NULL)
    return fallback;
  char *end = NULL;
  long long number = strtoll(value, &end, 10);
  if (end != value && *end == 0 && isdigit((unsigned char)value[value[0] == '-']) &&
      number >= min && number <= max)
    return number;
  jitops__env_warn(name, value, expected);
  return fallback;
}
