/* jitops/abi.h — what a family's ABI header (ops/<family>/<family>_abi.h) needs in order to
 * compile in both of its compilers: the host's C compiler, which includes it as
 * "templates/abi.h", and NVRTC, which gets it as the embedded source "jitops/abi.h".
 *
 * An ABI header holds the constants and the kernel argument structs that the host code and
 * the kernels share, written in the common subset of C11 and CUDA C++17: fixed-width integer
 * types, pointers and fixed-size arrays of them, no member functions. Its layout checks
 * (below) run in both compilers, so the two sides cannot drift apart unnoticed: a struct that
 * is laid out differently on one side fails to compile there.
 *
 * NVRTC has no <stdint.h> and no <stddef.h> without a CUDA include path, which the library
 * never passes (templates compile without the toolkit's headers); the few types it needs are
 * spelled out below. They have the sizes of the host's on every platform CUDA supports
 * (LP64 Linux: 8-byte long long and pointers, 4-byte int). */
#ifndef JITOPS_TEMPLATES_ABI_H
#define JITOPS_TEMPLATES_ABI_H

#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <stddef.h>
#include <stdint.h>
#endif

#if defined(__cplusplus)
#define JITOPS__ABI_ASSERT(condition, message) static_assert(condition, message)
#define JITOPS__ABI_ALIGNOF(type)              alignof(type)
#else
#define JITOPS__ABI_ASSERT(condition, message) _Static_assert(condition, message)
#define JITOPS__ABI_ALIGNOF(type)              _Alignof(type)
#endif

/* Why the two sides agree. The members of an ABI struct are 4- and 8-byte integers and
 * pointers, and these have the same size and alignment in both compilers (checked here); a
 * struct's layout then follows from its declaration alone, which both read from one header.
 * Each ABI header also checks every struct's total size on both sides (JITOPS__ABI_SIZE),
 * and its members' offsets on the host (JITOPS__ABI_OFFSET: NVRTC has no offsetof). */
#define JITOPS__ABI_SCALAR(type, bytes)                                                            \
  JITOPS__ABI_ASSERT(sizeof(type) == (bytes) && JITOPS__ABI_ALIGNOF(type) == (bytes),              \
                     #type " is not " #bytes " bytes, " #bytes "-aligned, on this side")
JITOPS__ABI_SCALAR(int32_t, 4);
JITOPS__ABI_SCALAR(uint32_t, 4);
JITOPS__ABI_SCALAR(int64_t, 8);
JITOPS__ABI_SCALAR(char *, 8);

/* `type` is `bytes` long, on the host and on the device alike. */
#define JITOPS__ABI_SIZE(type, bytes)                                                              \
  JITOPS__ABI_ASSERT(sizeof(type) == (bytes), "sizeof(" #type ") is not " #bytes " on this side")

/* `type`'s `member` starts `bytes` into it. Checked by the host's compiler; NVRTC checks only
 * that the member exists. */
#if defined(__CUDACC_RTC__)
#define JITOPS__ABI_OFFSET(type, member, bytes)                                                    \
  JITOPS__ABI_ASSERT(sizeof(((type *)0)->member) > 0, #type " has no member " #member)
#else
#define JITOPS__ABI_OFFSET(type, member, bytes)                                                    \
  JITOPS__ABI_ASSERT(offsetof(type, member) == (bytes), #type "." #member " is not at " #bytes)
#endif

#endif
