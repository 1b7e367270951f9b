#include "runtime/compiler.h"

#include <nvrtc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "common/log.h"

/* Measured in bench/NOTES-jit.md: -minimal trims the implicit device runtime declarations
 * and cuts the small-kernel compile time; our templates need nothing it removes.
 * --no-source-include keeps NVRTC from looking for a quoted include next to the source's name
 * on disk: it reads only the sources handed to it, which the cache key covers. */
const char *const jitops__default_options[] = {"-std=c++17", "-minimal", "--no-source-include"};
const size_t jitops__default_option_count =
    sizeof jitops__default_options / sizeof jitops__default_options[0];

static atomic_int nvrtc_compiled;

int jitops__nvrtc_has_compiled(void) {
  return atomic_load(&nvrtc_compiled);
}

int jitops__nvrtc_version(void) {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return major * 100 + minor;
}

jitops_status jitops__target_resolve(int arch, jitops__target *out) {
  int count = 0;
  if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0 || count > 256)
    return jitops__fail(JITOPS_ERR_INTERNAL, "NVRTC reports no supported architectures");
  int archs[256];
  nvrtcGetSupportedArchs(archs);
  int newest_below = 0;
  out->arch = arch;
  for (int i = 0; i < count; ++i) {
    if (archs[i] == arch) {
      out->emit_ptx = 0;
      snprintf(out->name, sizeof out->name, "sm_%d", arch);
      return JITOPS_SUCCESS;
    }
    if (archs[i] < arch && archs[i] > newest_below)
      newest_below = archs[i];
  }
  if (newest_below == 0)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED,
                        "sm_%d is older than every architecture this NVRTC supports (oldest "
                        "sm_%d)",
                        arch, archs[0]);
  out->emit_ptx = 1;
  snprintf(out->name, sizeof out->name, "compute_%d", newest_below);
  return JITOPS_SUCCESS;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static jitops_status nvrtc_fail(nvrtcResult result, const char *what) {
  jitops_status status =
      result == NVRTC_ERROR_OUT_OF_MEMORY ? JITOPS_ERR_OUT_OF_MEMORY : JITOPS_ERR_INTERNAL;
  return jitops__fail(status, "jitops_kernel_get: %s: %s", what, nvrtcGetErrorString(result));
}

static jitops_status compile_failed(nvrtcProgram program, const char *name_expression) {
  jitops__fail(JITOPS_ERR_COMPILE, "jitops_kernel_get: NVRTC could not compile %s:\n",
               name_expression);
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) == NVRTC_SUCCESS && size > 1) {
    char *log = malloc(size);
    if (log != NULL && nvrtcGetProgramLog(program, log) == NVRTC_SUCCESS)
      jitops__fail_append(log);
    free(log);
  }
  return JITOPS_ERR_COMPILE;
}

/* Fetches the image (CUBIN, else PTX) and the lowered name of a compiled program. */
static jitops_status collect(nvrtcProgram program, const char *name_expression, int ptx,
                             jitops__compiled *out) {
  nvrtcResult r =
      ptx ? nvrtcGetPTXSize(program, &out->size) : nvrtcGetCUBINSize(program, &out->size);
  if (r != NVRTC_SUCCESS)
    return nvrtc_fail(r, "reading the compiled image's size");
  out->image = malloc(out->size);
  if (out->image == NULL)
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "jitops_kernel_get: out of host memory");
  r = ptx ? nvrtcGetPTX(program, out->image) : nvrtcGetCUBIN(program, out->image);
  if (r != NVRTC_SUCCESS)
    return nvrtc_fail(r, "reading the compiled image");
  const char *lowered = NULL;
  r = nvrtcGetLoweredName(program, name_expression, &lowered);
  if (r != NVRTC_SUCCESS || lowered == NULL)
    return nvrtc_fail(r, "looking up the lowered name");
  out->lowered_name = strdup(lowered);
  if (out->lowered_name == NULL)
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "jitops_kernel_get: out of host memory");
  return JITOPS_SUCCESS;
}

static int options_emit_ptx(const char *const *options, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (strncmp(options[i], "--gpu-architecture=compute_", 27) == 0)
      return 1;
  return 0;
}

static jitops_status run_program(nvrtcProgram program, const char *name_expression,
                                 const char *const *options, size_t num_options,
                                 jitops__compiled *out) {
  nvrtcResult r = nvrtcAddNameExpression(program, name_expression);
  if (r != NVRTC_SUCCESS)
    return nvrtc_fail(r, "registering the name expression");
  r = nvrtcCompileProgram(program, (int)num_options, options);
  atomic_store(&nvrtc_compiled, 1);
  if (r == NVRTC_ERROR_COMPILATION || r == NVRTC_ERROR_INVALID_OPTION ||
      r == NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID)
    return compile_failed(program, name_expression);
  if (r != NVRTC_SUCCESS)
    return nvrtc_fail(r, "compiling");
  return collect(program, name_expression, options_emit_ptx(options, num_options), out);
}

jitops_status jitops__compile(const jitops__source *const *closure, size_t closure_count,
                              const char *name_expression, const char *const *options,
                              size_t num_options, jitops__compiled *out) {
  memset(out, 0, sizeof *out);
  size_t header_count = closure_count - 1;
  const char **header_texts = malloc((header_count + 1) * sizeof *header_texts);
  const char **header_names = malloc((header_count + 1) * sizeof *header_names);
  if (header_texts == NULL || header_names == NULL) {
    free(header_texts);
    free(header_names);
    return jitops__fail(JITOPS_ERR_OUT_OF_MEMORY, "jitops_kernel_get: out of host memory");
  }
  for (size_t i = 0; i < header_count; ++i) {
    header_texts[i] = closure[i + 1]->text;
    header_names[i] = closure[i + 1]->name;
  }
  double start = now_ms();
  nvrtcProgram program = NULL;
  nvrtcResult r = nvrtcCreateProgram(&program, closure[0]->text, closure[0]->name,
                                     (int)header_count, header_texts, header_names);
  free(header_texts);
  free(header_names);
  if (r != NVRTC_SUCCESS)
    return nvrtc_fail(r, "creating the program");
  jitops_status status = run_program(program, name_expression, options, num_options, out);
  nvrtcDestroyProgram(&program);
  out->compile_ms = now_ms() - start;
  if (status != JITOPS_SUCCESS)
    jitops__compiled_free(out);
  return status;
}

void jitops__compiled_free(jitops__compiled *compiled) {
  free(compiled->image);
  free(compiled->lowered_name);
  memset(compiled, 0, sizeof *compiled);
}

void jitops__nvrtc_warm_up(const jitops__target *target) {
  char arch[48];
  snprintf(arch, sizeof arch, "--gpu-architecture=%s", target->name);
  const char *options[] = {"-minimal", arch};
  nvrtcProgram program = NULL;
  if (nvrtcCreateProgram(&program, "__global__ void jitops_warm_up() {}", "jitops_warm_up.cu", 0,
                         NULL, NULL) != NVRTC_SUCCESS)
    return;
  const nvrtcResult r = nvrtcCompileProgram(program, 2, options);
  atomic_store(&nvrtc_compiled, 1);
  if (r != NVRTC_SUCCESS)
    jitops__log(JITOPS__LOG_DEBUG, "the warm-up compile failed: %s", nvrtcGetErrorString(r));
  nvrtcDestroyProgram(&program);
}
