/* All that an op family may use of the core, and the one core header a family includes:
 * errors (common/error.h), the device's properties (device.h), dtypes and the common tensor
 * checks (dtype.h, tensor_checks.h), launches (launch.h), scratch and stream-ordered memory
 * (scratch.h), the context for raw driver calls (context.h), per-runtime state (state.h) and
 * timed choices (tuning.h). Kernels come from jitops_kernel_get (jitops.h) with a built-in
 * source name such as "jitops/scan.cuh".
 *
 * How a family is laid out (ops/scan/ and ops/repeat/ are the models; ops/example/ has only a
 * catalogue):
 *
 *   ops/<family>/<family>_abi.h   the constants and kernel-argument structs the host code and
 *                                 the kernels share; compiles in C11 and in NVRTC (it includes
 *                                 templates/abi.h on the host, "jitops/abi.h" under NVRTC) and
 *                                 checks its layouts there (JITOPS__ABI_SIZE, _OFFSET). A kernel
 *                                 takes one such struct by value.
 *   ops/<family>/<name>.cuh       the kernel templates, embedded as "jitops/<name>.cuh" at build
 *                                 time (names are unique across ops/ and templates/); they
 *                                 include each other and the ABI header by those names.
 *   ops/<family>/args.{h,c}       validation: every argument checked on the host before any
 *                                 device work, with the checks of tensor_checks.h and messages
 *                                 that name the argument; fills a validated call.
 *   ops/<family>/plan.{h,c}       choices from a validated call: collapsed geometry, kernel
 *                                 variant, grid, workspace bytes, name expressions. Pure host
 *                                 arithmetic, so workspace queries, the catalogue and CPU tests
 *                                 use it too. Defines the family's source name.
 *   ops/<family>/run.c            the public entry points, straight through: validate, plan,
 *                                 jitops_kernel_get, fill the ABI struct, scratch, launch,
 *                                 release. Nothing else calls back into it.
 *   ops/<family>/catalogue.c      the family's jitops__catalogue_family
 *                                 (ops/catalogue_family.h), added to ops/catalogue.c.
 *
 * Symbols a family shares between its files are jitops__<family>_*; everything else is
 * static. Files include downward only: run -> plan, args; args -> plan; catalogue -> plan.
 * Moving a family here needs no CMake change (ops/ is globbed); a test that compiles its
 * templates on the host must then see ops/<family>/ as "jitops/" too (as test_ctc_emulated
 * sees templates/ through a link in tests/CMakeLists.txt).
 */
#ifndef JITOPS_RUNTIME_OP_SUPPORT_H
#define JITOPS_RUNTIME_OP_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jitops/jitops.h"
#include "common/error.h"
#include "runtime/context.h"
#include "runtime/device.h"
#include "runtime/kernel_batch.h"
#include "runtime/dtype.h"
#include "runtime/launch.h"
#include "runtime/scratch.h"
#include "runtime/state.h"
#include "runtime/tensor_checks.h"
#include "runtime/tuning.h"

#endif
