// The torch layer of jitops (libjitops_torch.so): every op as a PyTorch operator in the
// jitops namespace, with its CUDA kernel and its autograd formula in C++, so that a call
// costs what a native op costs (the Python package registers the fake kernels and the
// public functions). This header is what every op file shares: DLPack views of tensors, the
// runtime and current stream of a device, workspaces from PyTorch's caching allocator, and
// errors.
//
// Errors. A failed C call throws the c10 error that Python maps to the right built-in
// (c10::TypeError -> TypeError, ...), with a message that starts "[jitops:<status>] ":
// jitops.ops turns that into its own exception class.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <torch/library.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/ArrayRef.h>

#include <optional>
#include <string_view>

#include <jitops/jitops.h>

namespace jitops_torch {

// A DLTensor describing `tensor` in place: its shape and strides are the tensor's own, so
// the view lives as long as the tensor. A 0-d tensor can be seen as [1] (min_rank 1), whose
// shape and strides point at one word shared by every view, not into the view, so that a
// copy of a view is as good as the view (OptionalView assigns one).
class View {
public:
  View() = default;
  explicit View(const at::Tensor &tensor, int min_rank = 0);
  DLTensor *get() {
    return &dl_;
  }

private:
  DLTensor dl_{};
};

// A view of an optional tensor: NULL for nullopt or an undefined tensor.
class OptionalView {
public:
  explicit OptionalView(const std::optional<at::Tensor> &tensor, int min_rank = 0);
  DLTensor *get() {
    return present_ ? view_.get() : nullptr;
  }

private:
  View view_;
  bool present_ = false;
};

// The shared runtime of CUDA device `device` (created by the Python package's provider on
// first use, and given PyTorch's caching allocator for its scratch) and PyTorch's current
// stream there. Ops pass no workspace: the library takes what it needs from that allocator,
// on the op's stream, so PyTorch counts it and graphs capture it.
jitops_runtime_t *runtime_for(int device, std::string_view op);
void *current_stream(int device);

// Throws the error of a failed C call for op `op` (the Python name, "cumsum").
[[noreturn]] void fail(jitops_status status, std::string_view op);

inline void check(jitops_status status, std::string_view op) {
  if (status != JITOPS_SUCCESS)
    fail(status, op);
}

// What every op's C call needs: `tensor`'s device made current for the call (allocations
// follow it), and that device's runtime and current stream.
struct Launch {
  Launch(const at::Tensor &tensor, std::string_view op);
  c10::cuda::CUDAGuard device;
  jitops_runtime_t *runtime;
  void *stream;
};

// A new uninitialized tensor from PyTorch's caching allocator on `options`' CUDA device, made
// without a dispatcher call (at::empty's redispatch is a measurable part of a small op's host
// time). Only for outputs the C call then writes in full: it skips the NaN fill that
// at::empty does under torch.use_deterministic_algorithms with fill_uninitialized_memory.
at::Tensor new_output(at::IntArrayRef sizes, const at::TensorOptions &options);

// A new output shaped and strided as at::empty_like(tensor) makes it (contiguous for a
// contiguous tensor, else at::empty_like's own), with `dtype` when given.
at::Tensor new_output_like(const at::Tensor &tensor,
                           std::optional<at::ScalarType> dtype = std::nullopt);

// Whether autograd must record this call: grad mode on and an input that requires grad. When
// not, an op's autograd kernel calls the op below autograd directly, skipping the bookkeeping
// of a custom Function (which a no-grad call does not need).
inline bool records_grad(std::initializer_list<const at::Tensor *> inputs) {
  if (!at::GradMode::is_enabled())
    return false;
  for (const at::Tensor *t : inputs)
    if (t->defined() && t->requires_grad())
      return true;
  return false;
}

// The C code of a reduction or op name ("mean" -> 1), or an InvalidArgument error naming the
// choices.
int code_of(std::string_view name, c10::ArrayRef<std::string_view> names, std::string_view op,
            std::string_view what);

// Registers, for each name, a CPU kernel that refuses host tensors with a clear error
// (jitops ops run on CUDA tensors; CPU tensors are legal only beside CUDA ones, as CTC's
// host lengths).
void refuse_cpu_tensors(torch::Library &library, c10::ArrayRef<const char *> ops);

} // namespace jitops_torch
