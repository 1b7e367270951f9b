// Repeat (jitops/repeat.h): repeat and repeat_backward, with repeat's autograd formula.
#include "node.h"
#include "support.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/dynamo/compiled_autograd.h>
#include <torch/library.h>

namespace jitops_torch {
namespace {

using torch::autograd::variable_list;

// x's shape, padded with leading ones to the repeats' length, times the repeats.
std::vector<int64_t> repeated_shape(const at::Tensor &x, at::IntArrayRef repeats) {
  int64_t pad = static_cast<int64_t>(repeats.size()) - x.dim();
  TORCH_CHECK_VALUE(pad >= 0, "[jitops:2] jitops.repeat: ", repeats.size(),
                    " repeats for a tensor of rank ", x.dim(), "; give at least one per dimension");
  std::vector<int64_t> shape(repeats.size());
  for (size_t d = 0; d < repeats.size(); ++d) {
    TORCH_CHECK_VALUE(repeats[d] >= 0, "[jitops:6] jitops.repeat: repeats[", d, "] is ", repeats[d],
                      ", negative");
    int64_t size = static_cast<int64_t>(d) < pad ? 1 : x.size(static_cast<int64_t>(d) - pad);
    TORCH_CHECK_VALUE(!c10::mul_overflows(size, repeats[d], &shape[d]),
                      "[jitops:6] jitops.repeat: dimension ", d, " overflows int64");
  }
  return shape;
}

at::Tensor repeat_kernel(const at::Tensor &x, c10::SymIntArrayRef sym_repeats) {
  at::IntArrayRef repeats = C10_AS_INTARRAYREF_SLOW(sym_repeats);
  at::Tensor y = new_output(repeated_shape(x, repeats), x.options());
  View xv(x), yv(y);
  Launch launch(x, "repeat");
  check(jitops_repeat(launch.runtime, xv.get(), repeats.data(), static_cast<int>(repeats.size()),
                      yv.get(), launch.stream),
        "repeat");
  return y;
}

at::Tensor repeat_backward_kernel(const at::Tensor &grad, c10::SymIntArrayRef sym_repeats,
                                  c10::SymIntArrayRef input_shape) {
  at::IntArrayRef repeats = C10_AS_INTARRAYREF_SLOW(sym_repeats);
  at::Tensor grad_x = new_output(C10_AS_INTARRAYREF_SLOW(input_shape), grad.options());
  View gv(grad), gxv(grad_x);
  Launch launch(grad, "repeat_backward");
  check(jitops_repeat_backward(launch.runtime, gv.get(), repeats.data(),
                               static_cast<int>(repeats.size()), gxv.get(), nullptr, launch.stream),
        "repeat_backward");
  return grad_x;
}

c10::TypedOperatorHandle<at::Tensor(const at::Tensor &, c10::SymIntArrayRef)> &repeat_op() {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("jitops::repeat", "")
                       .typed<at::Tensor(const at::Tensor &, c10::SymIntArrayRef)>();
  return op;
}

// d/dx of repeat: each element's copies summed (the backward op, through the dispatcher).
struct RepeatBackward final : OpNode {
  std::vector<c10::SymInt> repeats, input_shape;

  std::string name() const override {
    return "jitops::repeat_backward";
  }

protected:
  variable_list backward(const at::Tensor &grad, const variable_list &) override {
    static auto op =
        c10::Dispatcher::singleton()
            .findSchemaOrThrow("jitops::repeat_backward", "")
            .typed<at::Tensor(const at::Tensor &, c10::SymIntArrayRef, c10::SymIntArrayRef)>();
    return {op.call(grad, repeats, input_shape)};
  }
  void collect_scalars(CompiledNodeArgs &args) const override {
    args.collect(repeats);
    args.collect(input_shape);
  }
  void swap_scalars(SwapSavedVariables &swap, bool before) override {
    if (before) {
      swap.before(repeats);
      swap.before(input_shape);
    } else {
      swap.after(repeats);
      swap.after(input_shape);
    }
  }
};

at::Tensor repeat_autograd(const at::Tensor &x, c10::SymIntArrayRef repeats) {
  refuse_forward_mode("repeat", {&x});
  const bool records = records_grad({&x});
  at::Tensor y;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    y = repeat_op().call(x, repeats);
  }
  if (!records)
    return y;
  auto node = make_node<RepeatBackward>(x);
  node->repeats = repeats.vec();
  node->input_shape = x.sym_sizes().vec();
  torch::autograd::set_history(y, node);
  return y;
}

} // namespace
} // namespace jitops_torch

using namespace jitops_torch;

TORCH_LIBRARY_FRAGMENT(jitops, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  m.def("repeat(Tensor x, SymInt[] repeats) -> Tensor", tags);
  m.def("repeat_backward(Tensor grad, SymInt[] repeats, SymInt[] input_shape) -> Tensor", tags);
}

TORCH_LIBRARY_IMPL(jitops, CUDA, m) {
  m.impl("repeat", &repeat_kernel);
  m.impl("repeat_backward", &repeat_backward_kernel);
}

TORCH_LIBRARY_IMPL(jitops, Autograd, m) {
  m.impl("repeat", &repeat_autograd);
}

TORCH_LIBRARY_IMPL(jitops, CPU, m) {
  refuse_cpu_tensors(m, {"repeat", "repeat_backward"});
}
