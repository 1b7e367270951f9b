/* For the GPU tests: CUDA_OK(call) counts a failed CUDA runtime call as a test failure, with
 * the call and the runtime's message, and goes on (the test reports it at the end). */
#ifndef JITOPS_TESTS_CUDA_CHECK_H
#define JITOPS_TESTS_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "testutil.h"

#define CUDA_OK(call)                                                                              \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));       \
      ++test_failures;                                                                             \
    }                                                                                              \
  } while (0)

#endif
