/* CTC's share of the prewarm catalogue (ops/catalogue_family.h): the kernels a typical
 * training run asks for. f32, f16 and bf16 log_probs, int64 padded targets with int64 (or
 * host) lengths, kernel capacities 256 .. 4096 (targets up to 2047 labels; the smaller buckets
 * run the 256 kernel, JITOPS__CTC_REG_MIN_KERNEL_CAP): the loss with the default
 * mean reduction (and, for f32, with none) and the fused alpha+beta pass; both gradient
 * conventions, with the upstream gradient in log_probs' dtype and, for half types, in f32;
 * and the batch reductions. */
#include <stdint.h>
#include <stdio.h>

#include "ops/catalogue_family.h"
#include "ops/ctc/plan.h"

enum { CATALOGUE_CAPS = 5 }; /* JITOPS__CTC_REG_MIN_KERNEL_CAP << 0 .. 4 */

static const jitops__dtype floats[] = {JITOPS__DTYPE_F32, JITOPS__DTYPE_F16, JITOPS__DTYPE_BF16};

/* A walk over the entries in catalogue order, looking for entry `want` (SIZE_MAX: none, to
 * count them). */
typedef struct cursor {
  size_t next, want;
  char *buf;
  size_t size;
} cursor;

/* Passes the next entry; true once it was the wanted one, written to the buffer. */
static bool offer(cursor *c, const char *name) {
  if (c->next++ != c->want)
    return false;
  snprintf(c->buf, c->size, "%s", name);
  return true;
}

static bool walk_alpha(cursor *c, jitops__dtype f) {
  static const int modes[] = {JITOPS__CTC_MODE_VALUES, JITOPS__CTC_MODE_AB, JITOPS__CTC_MODE_LOSS};
  const int n_modes = f == JITOPS__DTYPE_F32 ? 3 : 2; /* the loss with reduction none: f32 */
  char name[256];
  for (int cap = 0; cap < CATALOGUE_CAPS; ++cap)
    for (int m = 0; m < n_modes; ++m) {
      const jitops__ctc_alpha_kernel k = {f,
                                          JITOPS__DTYPE_I64,
                                          JITOPS__DTYPE_I64,
                                          JITOPS__CTC_OFFS_PADDED,
                                          (int64_t)JITOPS__CTC_REG_MIN_KERNEL_CAP << cap,
                                          JITOPS__CTC_STORE_REG,
                                          modes[m],
                                          JITOPS__DTYPE_F32};
      jitops__ctc_alpha_name(&k, name, sizeof name);
      if (offer(c, name))
        return true;
    }
  return false;
}

static bool walk_grad(cursor *c, jitops__dtype f) {
  char name[256];
  for (int tables = 1; tables >= 0; --tables)
    for (int torch = 0; torch < 2; ++torch) {
      jitops__ctc_grad_name(f, f, torch, tables, name, sizeof name);
      if (offer(c, name))
        return true;
      if (f == JITOPS__DTYPE_F32)
        continue;
      jitops__ctc_grad_name(f, JITOPS__DTYPE_F32, torch, tables, name, sizeof name);
      if (offer(c, name))
        return true;
    }
  return false;
}

static bool walk_reduce(cursor *c, jitops__dtype acc, jitops__dtype out) {
  char name[256];
  jitops__ctc_reduce_name(acc, out, name, sizeof name);
  return offer(c, name);
}

/* True once the wanted entry is found; c->next counts the entries passed. */
static bool walk(cursor *c) {
  for (size_t i = 0; i < sizeof floats / sizeof floats[0]; ++i)
    if (walk_alpha(c, floats[i]) || walk_grad(c, floats[i]) ||
        walk_reduce(c, JITOPS__DTYPE_F32, floats[i]))
      return true;
  return walk_reduce(c, JITOPS__DTYPE_F64, JITOPS__DTYPE_F64);
}

static size_t ctc_count(void) {
  cursor c = {0, SIZE_MAX, NULL, 0};
  walk(&c);
  return c.next;
}

static void ctc_entry(size_t index, char *buf, size_t size) {
  cursor c = {0, index, buf, size};
  if (size > 0)
    buf[0] = '\0';
  walk(&c);
}

const jitops__catalogue_family jitops__catalogue_ctc = {"ctc", ctc_count,          NULL,
                                                        NULL,  JITOPS__CTC_SOURCE, ctc_entry};
