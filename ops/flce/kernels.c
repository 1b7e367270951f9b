/* Name expressions of the flce template instances. */
#include "ops/flce/kernels.h"

#include <stdio.h>

int jitops__flce_rows_block(int64_t ncols) {
  if (ncols >= 8192)
    return 512;
  if (ncols >= 1024)
    return 256;
  return 128;
}

static const char *boolean(bool b) {
  return b ? "true" : "false";
}

void jitops__flce_rows_name(const jitops__flce_rows_kind *k, char *out, size_t size) {
  snprintf(out, size, "jitops::flce::rows<%s, %s, %d, %d, %s, %s, %s, %s, %s>",
           jitops__dtype_cname(k->t), jitops__dtype_cname(k->dy), k->block, k->mode,
           boolean(k->bias), boolean(k->softcap), boolean(k->smooth), boolean(k->zloss),
           boolean(k->mean));
}

void jitops__flce_name2(const char *kernel, jitops__dtype a, jitops__dtype b, char *out,
                        size_t size) {
  snprintf(out, size, "jitops::flce::%s<%s, %s>", kernel, jitops__dtype_cname(a),
           jitops__dtype_cname(b));
}

jitops_status jitops__flce_kernel(jitops_runtime_t *runtime, const char *name,
                                  jitops_kernel_t **out) {
  return jitops_kernel_get(runtime, JITOPS__FLCE_SOURCE, name, NULL, 0, out);
}
