// Fused linear cross-entropy (jitops/flce.h): the loss with the gradients for dy = 1
// (fused_linear_cross_entropy), the gradients for a per-row dy (..._grads, what reduction
// "none" needs), and the in-place scaling of saved gradients by a scalar dy (..._scale), with
// the loss's autograd formula.
#include "support.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/library.h>

#include <array>

namespace jitops_torch {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Optional = std::optional<at::Tensor>;
using Grads = std::array<bool, 3>; // input, weight, bias

constexpr std::string_view kOp = "fused_linear_cross_entropy";
constexpr std::string_view kReductions[] = {"none", "mean", "sum"}; // C's order

// A gradient not asked for is an empty 1-D tensor of its own (outputs must not alias).
at::Tensor gradient_like(bool wanted, const at::Tensor &param) {
  return wanted ? at::empty_like(param, at::MemoryFormat::Contiguous)
                : at::empty({0}, param.options());
}

bool absent(const at::Tensor &t) {
  return !t.defined() || (t.dim() == 1 && t.numel() == 0);
}

// The outputs of one forward call, viewed for the C call.
struct Outputs {
  at::Tensor loss, lse, grad_input, grad_weight, grad_bias;
};

void run_forward(const at::Tensor &input, const at::Tensor &weight, const at::Tensor &target,
                 const Optional &bias, const Optional &grad_output, Outputs &out,
                 int64_t ignore_index, double label_smoothing, double softcap, double z_loss_scale,
                 jitops_flce_reduction reduction, std::string_view name) {
  View iv(input), wv(weight), tv(target), lv(out.loss), sv(out.lse);
  OptionalView bv(bias), gov(grad_output);
  OptionalView giv(absent(out.grad_input) ? Optional() : Optional(out.grad_input));
  OptionalView gwv(absent(out.grad_weight) ? Optional() : Optional(out.grad_weight));
  OptionalView gbv(absent(out.grad_bias) ? Optional() : Optional(out.grad_bias));
  jitops_flce_tensors tensors = {iv.get(), wv.get(), bv.get(),  tv.get(),  gov.get(),
                                 lv.get(), sv.get(), giv.get(), gwv.get(), gbv.get()};
  jitops_flce_options options;
  jitops_flce_options_init(&options);
  options.reduction = reduction;
  options.ignore_index = ignore_index;
  options.label_smoothing = label_smoothing;
  options.softcap = softcap;
  options.z_loss_scale = z_loss_scale;
  Launch launch(input, name);
  check(jitops_flce_forward(launch.runtime, &tensors, &options, nullptr, launch.stream), name);
}

// The loss and lse in the accumulation type: f64 for f64, else f32.
at::TensorOptions accumulation(const at::Tensor &input) {
  return input.options().dtype(input.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
}

int64_t rows_of(const at::Tensor &input) {
  return input.dim() >= 1 ? input.size(0) : 0;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
forward_kernel(const at::Tensor &input, const at::Tensor &weight, const at::Tensor &target,
               const Optional &bias, int64_t ignore_index, double label_smoothing, double softcap,
               double z_loss_scale, c10::string_view reduction_name, Grads grads) {
  auto reduction = static_cast<jitops_flce_reduction>(
      code_of(std::string_view(reduction_name.data(), reduction_name.size()), kReductions, kOp,
              "reduction"));
  // With reduction none the gradients need each row's dy: the backward makes them.
  bool in_forward = reduction != JITOPS_FLCE_REDUCTION_NONE;
  Outputs out;
  int64_t rows = rows_of(input);
  out.loss = reduction == JITOPS_FLCE_REDUCTION_NONE ? at::empty({rows}, accumulation(input))
                                                     : at::empty({}, accumulation(input));
  out.lse = at::empty({rows}, accumulation(input));
  out.grad_input = gradient_like(in_forward && grads[0], input);
  out.grad_weight = gradient_like(in_forward && grads[1], weight);
  out.grad_bias = bias.has_value() ? gradient_like(in_forward && grads[2], *bias)
                                   : at::empty({0}, input.options());
  run_forward(input, weight, target, bias, std::nullopt, out, ignore_index, label_smoothing,
              softcap, z_loss_scale, reduction, kOp);
  return {out.loss, out.lse, out.grad_input, out.grad_weight, out.grad_bias};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
grads_kernel(const at::Tensor &grad, const at::Tensor &input, const at::Tensor &weight,
             const at::Tensor &target, const Optional &bias, int64_t ignore_index,
             double label_smoothing, double softcap, double z_loss_scale, Grads grads) {
  Outputs out;
  out.loss = at::empty({rows_of(input)}, accumulation(input));
  out.lse = at::empty({rows_of(input)}, accumulation(input));
  out.grad_input = gradient_like(grads[0], input);
  out.grad_weight = gradient_like(grads[1], weight);
  out.grad_bias =
      bias.has_value() ? gradient_like(grads[2], *bias) : at::empty({0}, input.options());
  run_forward(input, weight, target, bias, grad, out, ignore_index, label_smoothing, softcap,
              z_loss_scale, JITOPS_FLCE_REDUCTION_NONE, "fused_linear_cross_entropy_backward");
  return {out.grad_input, out.grad_weight, out.grad_bias};
}

void scale_kernel(const at::Tensor &grad, const at::Tensor &grad_input,
                  const at::Tensor &grad_weight, const at::Tensor &grad_bias) {
  View gv(grad);
  OptionalView giv(absent(grad_input) ? Optional() : Optional(grad_input));
  OptionalView gwv(absent(grad_weight) ? Optional() : Optional(grad_weight));
  OptionalView gbv(absent(grad_bias) ? Optional() : Optional(grad_bias));
  Launch launch(grad, "fused_linear_cross_entropy_backward");
  check(jitops_flce_backward(launch.runtime, gv.get(), giv.get(), gwv.get(), gbv.get(),
                             launch.stream),
        "fused_linear_cross_entropy_backward");
}

// ---- autograd --------------------------------------------------------------------------------

using ForwardSignature = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor &, const at::Tensor &, const at::Tensor &, const Optional &, int64_t, double,
    double, double, c10::string_view, Grads);
using GradsSignature = std::tuple<at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor &, const at::Tensor &, const at::Tensor &, const at::Tensor &,
    const Optional &, int64_t, double, double, double, Grads);
using ScaleSignature = void(const at::Tensor &, const at::Tensor &, const at::Tensor &,
                            const at::Tensor &);

template <class Signature> c10::TypedOperatorHandle<Signature> op_named(const char *name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

// Whether the saved gradients may be scaled where they are: in an eager backward that drops
// the graph. Not when the graph is kept (retain_graph=True, as gradcheck does: another
// backward needs them intact), nor while torch.compile traces (functional or fake tensors),
// where mutating a forward's output in the backward breaks the partition of the graph.
bool may_scale_in_place(const at::Tensor &saved) {
  c10::DispatchKeySet tracing({c10::DispatchKey::Python, c10::DispatchKey::Functionalize});
  return !torch::autograd::get_current_graph_task_keep_graph() && !saved.key_set().has_any(tracing);
}

struct LossFunction : public torch::autograd::Function<LossFunction> {
  static variable_list forward(AutogradContext *ctx, const at::Tensor &input,
                               const at::Tensor &weight, const at::Tensor &target,
                               const Optional &bias, int64_t ignore_index, double label_smoothing,
                               double softcap, double z_loss_scale, c10::string_view reduction,
                               Grads grads) {
    static auto op = op_named<ForwardSignature>("jitops::fused_linear_cross_entropy");
    std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> out;
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      out = op.call(input, weight, target, bias, ignore_index, label_smoothing, softcap,
                    z_loss_scale, reduction, grads);
    }
    auto &[loss, lse, grad_input, grad_weight, grad_bias] = out;
    bool none = reduction == "none";
    if (none)
      ctx->save_for_backward({input, weight, target, bias.value_or(at::Tensor())});
    else
      ctx->save_for_backward({grad_input, grad_weight, grad_bias});
    ctx->mark_non_differentiable({lse, grad_input, grad_weight, grad_bias});
    ctx->saved_data["none"] = none;
    ctx->saved_data["ignore_index"] = ignore_index;
    ctx->saved_data["options"] = std::vector<double>{label_smoothing, softcap, z_loss_scale};
    ctx->saved_data["grads"] = std::vector<bool>(grads.begin(), grads.end());
    ctx->saved_data["has_bias"] = bias.has_value() && bias->defined();
    return {loss, lse, grad_input, grad_weight, grad_bias};
  }

  static variable_list backward(AutogradContext *ctx, variable_list upstream) {
    variable_list saved = ctx->get_saved_variables();
    std::vector<bool> wanted = ctx->saved_data["grads"].toBoolList().vec();
    at::Tensor grad_input, grad_weight, grad_bias;
    if (ctx->saved_data["none"].toBool()) {
      static auto op = op_named<GradsSignature>("jitops::fused_linear_cross_entropy_grads");
      std::vector<double> o = ctx->saved_data["options"].toDoubleVector();
      const at::Tensor &bias = saved[3];
      std::tie(grad_input, grad_weight, grad_bias) = op.call(
          upstream[0], saved[0], saved[1], saved[2], bias.defined() ? Optional(bias) : std::nullopt,
          ctx->saved_data["ignore_index"].toInt(), o[0], o[1], o[2],
          Grads{wanted[0], wanted[1], wanted[2]});
    } else {
      static auto op = op_named<ScaleSignature>("jitops::fused_linear_cross_entropy_scale");
      grad_input = saved[0], grad_weight = saved[1], grad_bias = saved[2];
      if (!may_scale_in_place(grad_weight)) {
        grad_input = grad_input.clone();
        grad_weight = grad_weight.clone();
        grad_bias = grad_bias.clone();
      }
      op.call(upstream[0], grad_input, grad_weight, grad_bias);
    }
    // By the flags, not by the tensors' sizes, which may be symbolic while torch.compile traces.
    bool has_bias = ctx->saved_data["has_bias"].toBool();
    return {wanted[0] ? grad_input : at::Tensor(),
            wanted[1] ? grad_weight : at::Tensor(),
            at::Tensor(),
            wanted[2] && has_bias ? grad_bias : at::Tensor(),
            {},
            {},
            {},
            {},
            {},
            {}};
  }
};

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
forward_autograd(const at::Tensor &input, const at::Tensor &weight, const at::Tensor &target,
                 const Optional &bias, int64_t ignore_index, double label_smoothing, double softcap,
                 double z_loss_scale, c10::string_view reduction, Grads grads) {
  if (!records_grad({&input, &weight, bias.has_value() ? &*bias : &input})) {
    static auto op = op_named<ForwardSignature>("jitops::fused_linear_cross_entropy");
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(input, weight, target, bias, ignore_index, label_smoothing, softcap,
                   z_loss_scale, reduction, grads);
  }
  variable_list out = LossFunction::apply(input, weight, target, bias, ignore_index,
                                          label_smoothing, softcap, z_loss_scale, reduction, grads);
  return {out[0], out[1], out[2], out[3], out[4]};
}

} // namespace
} // namespace jitops_torch

using namespace jitops_torch;

TORCH_LIBRARY_FRAGMENT(jitops, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  // `grads` says which gradients autograd will want (input, weight, bias). With reduction mean
  // or sum they are computed here, for dy = 1; with none, the gradients come back empty.
  m.def("fused_linear_cross_entropy(Tensor input, Tensor weight, Tensor target, Tensor? bias, "
        "int ignore_index, float label_smoothing, float softcap, float z_loss_scale, "
        "str reduction, bool[3] grads) -> (Tensor loss, Tensor lse, Tensor grad_input, "
        "Tensor grad_weight, Tensor grad_bias)",
        tags);
  m.def("fused_linear_cross_entropy_grads(Tensor grad, Tensor input, Tensor weight, "
        "Tensor target, Tensor? bias, int ignore_index, float label_smoothing, float softcap, "
        "float z_loss_scale, bool[3] grads) -> (Tensor grad_input, Tensor grad_weight, "
        "Tensor grad_bias)",
        tags);
  m.def("fused_linear_cross_entropy_scale(Tensor grad, Tensor(a!) grad_input, "
        "Tensor(b!) grad_weight, Tensor(c!) grad_bias) -> ()",
        tags);
}

TORCH_LIBRARY_IMPL(jitops, CUDA, m) {
  m.impl("fused_linear_cross_entropy", &forward_kernel);
  m.impl("fused_linear_cross_entropy_grads", &grads_kernel);
  m.impl("fused_linear_cross_entropy_scale", &scale_kernel);
}

TORCH_LIBRARY_IMPL(jitops, Autograd, m) {
  m.impl("fused_linear_cross_entropy", &forward_autograd);
  m.impl("fused_linear_cross_entropy_scale", torch::autograd::autogradNotImplementedFallback());
}

TORCH_LIBRARY_IMPL(jitops, ADInplaceOrView, m) {
  m.impl("fused_linear_cross_entropy_scale",
         torch::autograd::autogradNotImplementedInplaceOrViewFallback());
}

TORCH_LIBRARY_IMPL(jitops, CPU, m) {
  refuse_cpu_tensors(m, {"fused_linear_cross_entropy", "fused_linear_cross_entropy_grads",
                         "fused_linear_cross_entropy_scale"});
}
