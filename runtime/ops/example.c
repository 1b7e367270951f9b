/* The example kernel's catalogue entries: jitops::example_axpy for the float types, the
 * kernel examples/quickstart.c and the JIT tests use. */
#include <stdio.h>

#include "runtime/op_support.h"

static const char *const example_types[] = {"float", "double", "jitops::half", "jitops::bfloat16"};
enum { EXAMPLE_ITEMS = 4 };

static size_t example_count(void) {
  return sizeof example_types / sizeof example_types[0];
}

static const char *example_describe(size_t index) {
  static _Thread_local char text[96];
  snprintf(text, sizeof text, "jitops::example_axpy<%s, %d>", example_types[index], EXAMPLE_ITEMS);
  return text;
}

static jitops_status example_compile(jitops_runtime_t *runtime, size_t index) {
  jitops_kernel_t *kernel;
  return jitops_kernel_get(runtime, "jitops/example.cuh", example_describe(index), NULL, 0,
                           &kernel);
}

const jitops__catalogue_family jitops__catalogue_example = {"example", example_count,
                                                            example_describe, example_compile};
