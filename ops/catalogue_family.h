/* What an op family exports to the prewarm catalogue: the common specializations of every
 * built-in op family, which `jitops-cache prewarm` compiles ahead of time (jitops_catalogue_*
 * in jitops.h). Each family defines one jitops__catalogue_family in its catalogue.c;
 * ops/catalogue.c strings them together. */
#ifndef JITOPS_OPS_CATALOGUE_FAMILY_H
#define JITOPS_OPS_CATALOGUE_FAMILY_H

#include <stddef.h>

#include "runtime/op_support.h"

/* A family's share of the catalogue: `count` entries, each described and compiled in one of
 * two ways.
 *   - Entry i is one kernel of `source`: `name` writes its name expression, which is also its
 *     description (scan, repeat, example). `describe` and `compile` are NULL.
 *   - Otherwise `describe` and `compile` do it (an entry may stand for several kernels). */
typedef struct jitops__catalogue_family {
  const char *op;
  size_t (*count)(void);
  const char *(*describe)(size_t index);
  jitops_status (*compile)(jitops_runtime_t *runtime, size_t index);
  const char *source;
  void (*name)(size_t index, char *buf, size_t size);
} jitops__catalogue_family;

#endif
