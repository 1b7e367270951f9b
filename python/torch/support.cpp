// DLPack views, runtimes, streams, workspaces and errors for the torch layer (support.h).
#include "support.h"

#include <ATen/cuda/EmptyTensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace jitops_torch {
namespace {

DLDataType dl_dtype(at::ScalarType type) {
  switch (type) {
  case at::kHalf:
    return {kDLFloat, 16, 1};
  case at::kBFloat16:
    return {kDLBfloat, 16, 1};
  case at::kFloat:
    return {kDLFloat, 32, 1};
  case at::kDouble:
    return {kDLFloat, 64, 1};
  case at::kInt:
    return {kDLInt, 32, 1};
  case at::kLong:
    return {kDLInt, 64, 1};
  case at::kShort:
    return {kDLInt, 16, 1};
  case at::kChar:
    return {kDLInt, 8, 1};
  case at::kByte:
    return {kDLUInt, 8, 1};
  default: // no DLPack code the library takes: it refuses it, naming the argument
    return {kDLOpaqueHandle, static_cast<uint8_t>(8 * c10::elementSize(type)), 1};
  }
}

// The Python package's provider: creates (or finds) the shared jitops.Runtime of a device.
// Set once, through jitops_torch_set_runtime_provider, when jitops.ops is imported.
using Provider = int (*)(int device, jitops_runtime_t **out, char *message, size_t size);
std::atomic<Provider> provider{nullptr};

constexpr int kMaxDevices = 64;
std::array<std::atomic<jitops_runtime_t *>, kMaxDevices> runtimes{};
// Guards the stores into `runtimes` and `forgotten` (jitops_torch_forget_runtimes' count),
// never held while the provider runs: the provider takes the GIL, and a thread holding the
// GIL while it waited for this lock would deadlock with it.
std::mutex runtimes_lock;
uint64_t forgotten = 0;

// Scratch from PyTorch's caching allocator, on the current device (Launch makes it the op's)
// and the op's stream: released right after the op is enqueued, the block is reused only in
// that stream's order.
void *torch_allocate(void *, size_t bytes, void *stream) {
  // No exception may cross the library's C frames (it would terminate the process).
  try {
    return c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(
        bytes, static_cast<cudaStream_t>(stream));
  } catch (...) {
    return nullptr; // the library reports JITOPS_ERR_OUT_OF_MEMORY
  }
}

void torch_release(void *, void *ptr, size_t, void *) {
  try {
    c10::cuda::CUDACachingAllocator::raw_delete(ptr);
  } catch (...) {
    // A block the allocator does not know: nothing to free, and no way to report it here.
  }
}

// The shape and the strides of a 0-d tensor seen as [1]. The library only reads a DLTensor's
// shape and strides, so every view shares this one word.
int64_t unit_extent = 1;

} // namespace

View::View(const at::Tensor &tensor, int min_rank) {
  dl_.data = tensor.data_ptr();
  dl_.device = tensor.is_cuda() ? DLDevice{kDLCUDA, static_cast<int32_t>(tensor.get_device())}
                                : DLDevice{kDLCPU, 0};
  dl_.dtype = dl_dtype(tensor.scalar_type());
  dl_.byte_offset = 0; // data_ptr() already counts the storage offset
  if (tensor.dim() < min_rank) {
    dl_.ndim = 1;
    dl_.shape = dl_.strides = &unit_extent;
    return;
  }
  dl_.ndim = static_cast<int32_t>(tensor.dim());
  dl_.shape = const_cast<int64_t *>(tensor.sizes().data());
  dl_.strides = const_cast<int64_t *>(tensor.strides().data());
}

OptionalView::OptionalView(const std::optional<at::Tensor> &tensor, int min_rank) {
  present_ = tensor.has_value() && tensor->defined();
  if (present_)
    view_ = View(*tensor, min_rank);
}

jitops_runtime_t *runtime_for(int device, std::string_view op) {
  if (device < 0 || device >= kMaxDevices)
    TORCH_CHECK_VALUE(false, "[jitops:5] jitops.", op, ": CUDA device ", device,
                      " is out of the supported range");
  jitops_runtime_t *runtime = runtimes[device].load(std::memory_order_acquire);
  if (runtime != nullptr)
    return runtime;
  uint64_t generation;
  {
    std::lock_guard<std::mutex> guard(runtimes_lock);
    generation = forgotten;
  }
  // Two threads may both ask: the provider returns the device's one shared runtime to each,
  // and the second allocator install answers ALREADY_EXISTS.
  Provider provide = provider.load();
  TORCH_CHECK(provide != nullptr, "[jitops:16] jitops.", op,
              ": the torch layer has no runtime provider (import jitops.ops first)");
  char message[1024] = "";
  int status = provide(device, &runtime, message, sizeof message);
  if (status != JITOPS_SUCCESS)
    TORCH_CHECK(false, "[jitops:", status, "] jitops.", op, ": ", message);
  jitops_allocator allocator = {torch_allocate, torch_release, nullptr};
  jitops_status installed = jitops_runtime_set_allocator(runtime, &allocator);
  if (installed != JITOPS_SUCCESS && installed != JITOPS_ERR_ALREADY_EXISTS)
    fail(installed, op);
  std::lock_guard<std::mutex> guard(runtimes_lock);
  if (generation == forgotten) // not forgotten while the provider ran: keep it
    runtimes[device].store(runtime, std::memory_order_release);
  return runtime;
}

at::Tensor new_output(at::IntArrayRef sizes, const at::TensorOptions &options) {
  // The dispatcher picks the CUDA kernel when any tensor is on CUDA, so the leading tensor,
  // whose options an output takes, may be on the CPU: say so as the library would, instead
  // of PyTorch's internal assertion in empty_cuda.
  TORCH_CHECK_VALUE(options.device().is_cuda(), "[jitops:5] jitops: the op's leading tensor is on ",
                    options.device(), "; every tensor of a jitops op must be on one CUDA device");
  return at::Tensor(at::detail::empty_cuda(sizes, options.dtype().toScalarType(), options.device(),
                                           std::nullopt));
}

at::Tensor new_output_like(const at::Tensor &tensor, std::optional<at::ScalarType> dtype) {
  at::TensorOptions options = tensor.options().dtype(dtype.value_or(tensor.scalar_type()));
  if (!tensor.is_contiguous())
    return at::empty_like(tensor, options);
  return new_output(tensor.sizes(), options);
}

void *current_stream(int device) {
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
}

Launch::Launch(const at::Tensor &tensor, std::string_view op)
    : device(tensor.device()), runtime(runtime_for(tensor.get_device(), op)),
      stream(current_stream(tensor.get_device())) {}

void fail(jitops_status status, std::string_view op) {
  // The library's message starts with its C entry point ("jitops_scan_workspace_size: ..."),
  // which a Python caller never called: the op's name replaces it.
  std::string message = jitops_last_error();
  size_t colon = message.find(": ");
  if (message.rfind("jitops_", 0) == 0 && colon != std::string::npos)
    message.erase(0, colon + 2);
  std::string text =
      "[jitops:" + std::to_string(status) + "] jitops." + std::string(op) + ": " + message;
  switch (status) {
  case JITOPS_ERR_INVALID_DTYPE:
    TORCH_CHECK_TYPE(false, text);
  case JITOPS_ERR_INVALID_ARGUMENT:
  case JITOPS_ERR_INVALID_SHAPE:
  case JITOPS_ERR_INVALID_LAYOUT:
  case JITOPS_ERR_INVALID_DEVICE:
  case JITOPS_ERR_OUT_OF_RANGE:
  case JITOPS_ERR_ALREADY_EXISTS:
    TORCH_CHECK_VALUE(false, text);
  case JITOPS_ERR_UNSUPPORTED:
    TORCH_CHECK_NOT_IMPLEMENTED(false, text);
  default:
    TORCH_CHECK(false, text);
  }
}

int code_of(std::string_view name, c10::ArrayRef<std::string_view> names, std::string_view op,
            std::string_view what) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name)
      return static_cast<int>(i);
  std::string choices;
  for (std::string_view n : names)
    choices += (choices.empty() ? "'" : ", '") + std::string(n) + "'";
  TORCH_CHECK_VALUE(false, "[jitops:1] jitops.", op, ": ", what, " must be one of ", choices,
                    "; got '", name, "'");
}

namespace {

void refuse(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
  const auto &arguments = op.schema().arguments();
  size_t first = stack->size() - arguments.size();
  std::string where = "an argument";
  for (size_t i = 0; i < arguments.size(); ++i) {
    const c10::IValue &value = (*stack)[first + i];
    if (value.isTensor() && value.toTensor().is_cpu()) {
      where = arguments[i].name();
      break;
    }
  }
  TORCH_CHECK_VALUE(false, "[jitops:5] jitops.", op.schema().name().substr(8), ": ", where,
                    " is a CPU tensor; jitops ops run on CUDA tensors");
}

} // namespace

void refuse_cpu_tensors(torch::Library &library, c10::ArrayRef<const char *> ops) {
  for (const char *name : ops)
    library.impl(name, torch::CppFunction::makeFromBoxedFunction<&refuse>());
}

} // namespace jitops_torch

// Called by jitops's exit handler (through ctypes) before it destroys the shared runtimes:
// the layer forgets the pointers it kept, so that an op called later in the exit (from an
// exit handler registered before jitops was imported, or a daemon thread) asks the provider
// for a runtime again instead of using a destroyed one.
extern "C" __attribute__((visibility("default"))) void jitops_torch_forget_runtimes(void) {
  std::lock_guard<std::mutex> guard(jitops_torch::runtimes_lock);
  ++jitops_torch::forgotten;
  for (auto &runtime : jitops_torch::runtimes)
    runtime.store(nullptr, std::memory_order_release);
}

// Called once by jitops.ops (through ctypes) with the address of its runtime provider.
extern "C" __attribute__((visibility("default"))) void
jitops_torch_set_runtime_provider(void *function) {
  jitops_torch::provider.store(reinterpret_cast<jitops_torch::Provider>(function));
}
