/* The example kernel's catalogue entries: jitops::example_axpy for the float types, the
 * kernel examples/quickstart.c and the JIT tests use.
 *
 * The example family has no entry point of its own, so of the module skeleton (args.c,
 * plan.c, run.c, catalogue.c, example_abi.h) it has only this file and its template. Its
 * kernel keeps positional arguments on purpose: it is what a user of the raw JIT service
 * launches through jitops_kernel_launch with a void *args[] of their own (see
 * examples/quickstart.c), the case that the one-struct ABI of the built-in ops is not for. */
#include <stdio.h>

#include "ops/catalogue_family.h"

static const char *const example_types[] = {"float", "double", "jitops::half", "jitops::bfloat16"};
enum { EXAMPLE_ITEMS = 4 };

static size_t example_count(void) {
  return sizeof example_types / sizeof example_types[0];
}

static void example_entry(size_t index, char *buf, size_t size) {
  snprintf(buf, size, "jitops::example_axpy<%s, %d>", example_types[index], EXAMPLE_ITEMS);
}

const jitops__catalogue_family jitops__catalogue_example = {
    "example", example_count, NULL, NULL, "jitops/example.cuh", example_entry};
