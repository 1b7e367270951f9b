/* The prewarm catalogue of fused linear cross-entropy: the kernels of a language model's
 * output layer in bf16, f16 and f32 with a large vocabulary (rows of >= 8192 columns) and no
 * bias, softcap, label smoothing or z-loss; reduction mean (and sum/none, which share the
 * statistics pass); the f32 accumulator conversions, loss reductions and backward scales
 * of contiguous gradients. */
#include "ops/catalogue_family.h"
#include "ops/flce/kernels.h"

static const char *const flce_entries[] = {
    "jitops::flce::count_valid",
    "jitops::flce::reduce_loss<float, float>",
    "jitops::flce::convert<float, float>",
    "jitops::flce::rows<jitops::bfloat16, float, 512, 0, false, false, false, false, false>",
    "jitops::flce::rows<jitops::bfloat16, float, 512, 1, false, false, false, false, true>",
    "jitops::flce::rows<jitops::bfloat16, float, 512, 1, false, false, false, false, false>",
    "jitops::flce::rows<jitops::bfloat16, float, 512, 2, false, false, false, false, true>",
    "jitops::flce::rows<jitops::bfloat16, float, 256, 2, false, false, false, false, true>",
    "jitops::flce::convert<float, jitops::bfloat16>",
    "jitops::flce::convert_flat<float, jitops::bfloat16>",
    "jitops::flce::reduce_loss<float, jitops::bfloat16>",
    "jitops::flce::scale_flat<jitops::bfloat16, jitops::bfloat16>",
    "jitops::flce::scale_flat<jitops::bfloat16, float>",
    "jitops::flce::rows<jitops::half, float, 512, 0, false, false, false, false, false>",
    "jitops::flce::rows<jitops::half, float, 512, 1, false, false, false, false, true>",
    "jitops::flce::rows<jitops::half, float, 512, 1, false, false, false, false, false>",
    "jitops::flce::rows<jitops::half, float, 512, 2, false, false, false, false, true>",
    "jitops::flce::rows<jitops::half, float, 256, 2, false, false, false, false, true>",
    "jitops::flce::convert<float, jitops::half>",
    "jitops::flce::convert_flat<float, jitops::half>",
    "jitops::flce::reduce_loss<float, jitops::half>",
    "jitops::flce::scale_flat<jitops::half, jitops::half>",
    "jitops::flce::scale_flat<jitops::half, float>",
    "jitops::flce::rows<float, float, 512, 0, false, false, false, false, false>",
    "jitops::flce::rows<float, float, 512, 1, false, false, false, false, true>",
    "jitops::flce::rows<float, float, 512, 1, false, false, false, false, false>",
    "jitops::flce::rows<float, float, 512, 2, false, false, false, false, true>",
    "jitops::flce::rows<float, float, 256, 2, false, false, false, false, true>",
    "jitops::flce::scale_flat<float, float>",
};

static size_t flce_count(void) {
  return sizeof flce_entries / sizeof flce_entries[0];
}

static const char *flce_describe(size_t index) {
  return flce_entries[index];
}

static jitops_status flce_compile(jitops_runtime_t *runtime, size_t index) {
  jitops_kernel_t *kernel;
  return jitops__flce_kernel(runtime, flce_entries[index], &kernel);
}

const jitops__catalogue_family jitops__catalogue_flce = {"flce",       flce_count, flce_describe,
                                                         flce_compile, NULL,       NULL};
