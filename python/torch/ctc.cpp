// CTC loss (jitops/ctc.h): ctc_loss and ctc_loss_backward (the exact gradient), with the
// loss's autograd formula. Lengths in host memory are checked on the host; on the device they
// are never read by the host.
#include "node.h"
#include "support.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/dynamo/compiled_autograd.h>
#include <torch/library.h>

namespace jitops_torch {
namespace {

using torch::autograd::variable_list;

// jitops_ctc_reduction's order.
constexpr std::string_view kReductions[] = {"none", "sum", "mean"};

jitops_ctc_options options_of(int64_t blank, c10::string_view reduction, bool zero_infinity,
                              int64_t max_target_length, std::string_view op) {
  jitops_ctc_options options;
  jitops_ctc_options_init(&options);
  options.blank = blank;
  options.reduction = static_cast<jitops_ctc_reduction>(
      code_of(std::string_view(reduction.data(), reduction.size()), kReductions, op, "reduction"));
  options.zero_infinity = zero_infinity;
  options.max_target_length = max_target_length;
  options.gradient = JITOPS_CTC_GRADIENT_EXACT;
  return options;
}

// The four inputs, viewed.
struct Inputs {
  Inputs(const at::Tensor &log_probs, const at::Tensor &targets, const at::Tensor &input_lengths,
         const at::Tensor &target_lengths)
      : log_probs(log_probs), targets(targets), input_lengths(input_lengths),
        target_lengths(target_lengths) {}
  View log_probs, targets, input_lengths, target_lengths;
};

at::Tensor loss_kernel(const at::Tensor &log_probs, const at::Tensor &targets,
                       const at::Tensor &input_lengths, const at::Tensor &target_lengths,
                       int64_t blank, c10::string_view reduction, bool zero_infinity,
                       int64_t max_target_length) {
  jitops_ctc_options options =
      options_of(blank, reduction, zero_infinity, max_target_length, "ctc_loss");
  TORCH_CHECK_VALUE(log_probs.dim() == 3, "[jitops:2] jitops.ctc_loss: log_probs has rank ",
                    log_probs.dim(), "; expected [T, N, C]");
  // The loss of 16-bit inputs is f32: they accumulate in f32.
  at::ScalarType dtype =
      at::isReducedFloatingType(log_probs.scalar_type()) ? at::kFloat : log_probs.scalar_type();
  at::Tensor loss = options.reduction == JITOPS_CTC_REDUCTION_NONE
                        ? new_output({log_probs.size(1)}, log_probs.options().dtype(dtype))
                        : new_output({}, log_probs.options().dtype(dtype));
  Inputs in(log_probs, targets, input_lengths, target_lengths);
  View lv(loss);
  Launch launch(log_probs, "ctc_loss");
  check(jitops_ctc_loss(launch.runtime, in.log_probs.get(), in.targets.get(),
                        in.input_lengths.get(), in.target_lengths.get(), &options, lv.get(),
                        nullptr, launch.stream),
        "ctc_loss");
  return loss;
}

at::Tensor backward_kernel(const at::Tensor &grad, const at::Tensor &log_probs,
                           const at::Tensor &targets, const at::Tensor &input_lengths,
                           const at::Tensor &target_lengths, int64_t blank,
                           c10::string_view reduction, bool zero_infinity,
                           int64_t max_target_length) {
  jitops_ctc_options options =
      options_of(blank, reduction, zero_infinity, max_target_length, "ctc_loss_backward");
  at::Tensor grad_log_probs = new_output_like(log_probs);
  Inputs in(log_probs, targets, input_lengths, target_lengths);
  View gv(grad), glv(grad_log_probs);
  Launch launch(log_probs, "ctc_loss_backward");
  check(jitops_ctc_loss_backward(launch.runtime, in.log_probs.get(), in.targets.get(),
                                 in.input_lengths.get(), in.target_lengths.get(), gv.get(),
                                 &options, glv.get(), nullptr, nullptr, launch.stream),
        "ctc_loss_backward");
  return grad_log_probs;
}

// ---- autograd --------------------------------------------------------------------------------

using LossSignature = at::Tensor(const at::Tensor &, const at::Tensor &, const at::Tensor &,
                                 const at::Tensor &, int64_t, c10::string_view, bool, int64_t);
using BackwardSignature = at::Tensor(const at::Tensor &, const at::Tensor &, const at::Tensor &,
                                     const at::Tensor &, const at::Tensor &, int64_t,
                                     c10::string_view, bool, int64_t);

c10::TypedOperatorHandle<LossSignature> &loss_op() {
  static auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("jitops::ctc_loss", "").typed<LossSignature>();
  return op;
}

// The forward computes the loss alone; the backward runs the alpha+beta pass and the
// gradient (jitops_ctc_loss_backward) from the saved inputs, so nothing larger than the inputs
// is kept between them.
struct LossBackward final : OpNode {
  int64_t blank = 0, max_target_length = 0;
  std::string reduction;
  bool zero_infinity = false;

  std::string name() const override {
    return "jitops::ctc_loss_backward";
  }

protected:
  variable_list backward(const at::Tensor &grad, const variable_list &s) override {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("jitops::ctc_loss_backward", "")
                         .typed<BackwardSignature>();
    return {
        op.call(grad, s[0], s[1], s[2], s[3], blank, reduction, zero_infinity, max_target_length)};
  }
  void collect_scalars(CompiledNodeArgs &args) const override {
    args.collect(blank);
    args.collect(max_target_length);
    args.collect(reduction);
    args.collect(zero_infinity);
  }
};

at::Tensor loss_autograd(const at::Tensor &log_probs, const at::Tensor &targets,
                         const at::Tensor &input_lengths, const at::Tensor &target_lengths,
                         int64_t blank, c10::string_view reduction, bool zero_infinity,
                         int64_t max_target_length) {
  refuse_forward_mode("ctc_loss", {&log_probs});
  const bool records = records_grad({&log_probs});
  at::Tensor loss;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    loss = loss_op().call(log_probs, targets, input_lengths, target_lengths, blank, reduction,
                          zero_infinity, max_target_length);
  }
  if (!records)
    return loss;
  auto node = make_node<LossBackward>(log_probs);
  node->blank = blank;
  node->max_target_length = max_target_length;
  node->reduction = std::string(reduction.data(), reduction.size());
  node->zero_infinity = zero_infinity;
  torch::autograd::set_history(loss, node);
  for (const at::Tensor *t : {&log_probs, &targets, &input_lengths, &target_lengths})
    node->save(*t);
  return loss;
}

} // namespace
} // namespace jitops_torch

using namespace jitops_torch;

TORCH_LIBRARY_FRAGMENT(jitops, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  m.def("ctc_loss(Tensor log_probs, Tensor targets, Tensor input_lengths, Tensor target_lengths, "
        "int blank, str reduction, bool zero_infinity, int max_target_length) -> Tensor",
        tags);
  m.def("ctc_loss_backward(Tensor grad, Tensor log_probs, Tensor targets, Tensor input_lengths, "
        "Tensor target_lengths, int blank, str reduction, bool zero_infinity, "
        "int max_target_length) -> Tensor",
        tags);
}

TORCH_LIBRARY_IMPL(jitops, CUDA, m) {
  m.impl("ctc_loss", &loss_kernel);
  m.impl("ctc_loss_backward", &backward_kernel);
}

TORCH_LIBRARY_IMPL(jitops, Autograd, m) {
  m.impl("ctc_loss", &loss_autograd);
}

TORCH_LIBRARY_IMPL(jitops, CPU, m) {
  refuse_cpu_tensors(m, {"ctc_loss", "ctc_loss_backward"});
}
