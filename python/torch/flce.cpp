// Fused linear cross-entropy (jitops/flce.h): the loss with the gradients for dy = 1
// (fused_linear_cross_entropy), the gradients for a per-row dy (..._grads, what reduction
// "none" needs), and the in-place scaling of saved gradients by a scalar dy (..._scale), with
// the loss's autograd node (LossBackward).
//
// The forward returns a list: the loss, then only what the call asked for (each row's lse,
// the gradients its backward will want), so that a call allocates no placeholder outputs.
#include "node.h"
#include "support.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/dynamo/compiled_autograd.h>
#include <torch/library.h>

#include <array>

namespace jitops_torch {
namespace {

using torch::autograd::variable_list;
using Optional = std::optional<at::Tensor>;
using Grads = std::array<bool, 3>; // input, weight, bias

constexpr std::string_view kOp = "fused_linear_cross_entropy";
constexpr std::string_view kReductions[] = {"none", "mean", "sum"}; // C's order

// A gradient not asked for is an empty 1-D tensor of its own (outputs must not alias).
at::Tensor gradient_like(bool wanted, const at::Tensor &param) {
  if (!wanted)
    return new_output({0}, param.options());
  return new_output(param.sizes(), param.options());
}

bool absent(const at::Tensor &t) {
  return !t.defined() || (t.dim() == 1 && t.numel() == 0);
}

// Which gradients a forward call makes, the rule its CUDA kernel and its backward share; the
// backward saves it as one integer.
struct Flags {
  bool none = false;     // reduction "none": the backward runs the fused pass again with dy
  Grads grads{};         // the gradients autograd wants (input, weight, bias)
  bool has_bias = false; // by the flag, not the tensor: sizes may be symbolic while tracing

  int64_t pack() const {
    return none | grads[0] << 1 | grads[1] << 2 | grads[2] << 3 | has_bias << 4;
  }
  static Flags unpack(int64_t bits) {
    return {(bits & 1) != 0, {(bits & 2) != 0, (bits & 4) != 0, (bits & 8) != 0}, (bits & 16) != 0};
  }
  // Whether the forward made gradient i (0 input, 1 weight, 2 bias).
  bool made(int i) const {
    return !none && grads[i] && (i < 2 || has_bias);
  }
};

// The outputs of one forward call, viewed for the C call; an undefined (or empty placeholder)
// gradient or lse is not wanted.
struct Outputs {
  at::Tensor loss, lse, grad_input, grad_weight, grad_bias;

  // The loss, then each defined output in the order above: the forward op's result.
  std::vector<at::Tensor> list() const {
    std::vector<at::Tensor> out{loss};
    for (const at::Tensor *t : {&lse, &grad_input, &grad_weight, &grad_bias})
      if (t->defined())
        out.push_back(*t);
    return out;
  }
};

void run_forward(const at::Tensor &input, const at::Tensor &weight, const at::Tensor &target,
                 const Optional &bias, const Optional &grad_output, Outputs &out,
                 int64_t ignore_index, double label_smoothing, double softcap, double z_loss_scale,
                 jitops_flce_reduction reduction, std::string_view name) {
  View iv(input), wv(weight), tv(target), lv(out.loss);
  OptionalView sv(out.lse), bv(bias), gov(grad_output);
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

// A small call's gradients may share one allocation, each at an aligned offset: one trip to the
// caching allocator (and one free) instead of two or three, on calls whose host time is most of
// their cost. Only for gradients the autograd node keeps (see forward_autograd), and only up to
// this many bytes in all, since a gradient that autograd hands on (weight.grad keeps the one it
// is given) keeps the whole block alive.
constexpr int64_t kSharedGradientBytes = int64_t{4} << 20;
constexpr int64_t kGradientAlignment = 256; // bytes; cuBLASLt and the vector loads want 16

// A contiguous tensor of `sizes` and `dtype` over `storage` from byte `offset` (a multiple of
// the dtype's size), made without a dispatcher call, as new_output is.
at::Tensor in_storage(const c10::Storage &storage, int64_t offset, at::IntArrayRef sizes,
                      caffe2::TypeMeta dtype) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      c10::Storage(storage), c10::DispatchKeySet(c10::DispatchKey::CUDA), dtype);
  impl->set_sizes_contiguous(sizes);
  impl->set_storage_offset(offset / static_cast<int64_t>(dtype.itemsize()));
  return at::Tensor(std::move(impl));
}

// The gradients the forward makes (flags.made), shaped as their parameters and contiguous:
// each its own allocation, or consecutive in one when `may_share` and there are two or three
// of at most kSharedGradientBytes together.
void allocate_gradients(Outputs &out, const at::Tensor &input, const at::Tensor &weight,
                        const Optional &bias, Flags flags, bool may_share) {
  const at::Tensor *params[3] = {&input, &weight, bias.has_value() ? &*bias : nullptr};
  at::Tensor *grads[3] = {&out.grad_input, &out.grad_weight, &out.grad_bias};
  int64_t offsets[3] = {}, end = 0;
  int made = 0;
  for (int i = 0; i < 3; ++i)
    if (flags.made(i)) {
      offsets[i] = end;
      int64_t bytes = params[i]->numel() * static_cast<int64_t>(params[i]->itemsize());
      end += (bytes + kGradientAlignment - 1) / kGradientAlignment * kGradientAlignment;
      ++made;
    }
  bool share = may_share && made >= 2 && end <= kSharedGradientBytes;
  at::Tensor block = share ? new_output({end}, input.options().dtype(at::kByte)) : at::Tensor();
  for (int i = 0; i < 3; ++i)
    if (flags.made(i))
      *grads[i] =
          share ? in_storage(block.storage(), offsets[i], params[i]->sizes(), params[i]->dtype())
                : new_output(params[i]->sizes(), params[i]->options());
}

std::vector<at::Tensor> forward_impl(const at::Tensor &input, const at::Tensor &weight,
                                     const at::Tensor &target, const Optional &bias,
                                     int64_t ignore_index, double label_smoothing, double softcap,
                                     double z_loss_scale, c10::string_view reduction_name,
                                     Grads grads, bool lse, bool may_share) {
  auto reduction = static_cast<jitops_flce_reduction>(
      code_of(std::string_view(reduction_name.data(), reduction_name.size()), kReductions, kOp,
              "reduction"));
  // With reduction none the gradients need each row's dy: the backward makes them.
  bool in_forward = reduction != JITOPS_FLCE_REDUCTION_NONE;
  int64_t rows = rows_of(input);
  Outputs out;
  out.loss =
      in_forward ? new_output({}, accumulation(input)) : new_output({rows}, accumulation(input));
  if (lse)
    out.lse = new_output({rows}, accumulation(input));
  allocate_gradients(out, input, weight, bias, Flags{!in_forward, grads, bias.has_value()},
                     may_share);
  run_forward(input, weight, target, bias, std::nullopt, out, ignore_index, label_smoothing,
              softcap, z_loss_scale, reduction, kOp);
  return out.list();
}

// The op's CUDA kernel: its outputs never share storage (an op's outputs may not alias; only the
// autograd kernel, for a caller that drops the gradients, may let them share).
std::vector<at::Tensor> forward_kernel(const at::Tensor &input, const at::Tensor &weight,
                                       const at::Tensor &target, const Optional &bias,
                                       int64_t ignore_index, double label_smoothing, double softcap,
                                       double z_loss_scale, c10::string_view reduction_name,
                                       Grads grads, bool lse, bool /*shared_gradients*/) {
  return forward_impl(input, weight, target, bias, ignore_index, label_smoothing, softcap,
                      z_loss_scale, reduction_name, grads, lse, false);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor>
grads_kernel(const at::Tensor &grad, const at::Tensor &input, const at::Tensor &weight,
             const at::Tensor &target, const Optional &bias, int64_t ignore_index,
             double label_smoothing, double softcap, double z_loss_scale, Grads grads) {
  Outputs out;
  out.loss = new_output({rows_of(input)}, accumulation(input));
  out.grad_input = gradient_like(grads[0], input);
  out.grad_weight = gradient_like(grads[1], weight);
  out.grad_bias =
      bias.has_value() ? gradient_like(grads[2], *bias) : new_output({0}, input.options());
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

using ForwardSignature = std::vector<at::Tensor>(const at::Tensor &, const at::Tensor &,
                                                 const at::Tensor &, const Optional &, int64_t,
                                                 double, double, double, c10::string_view, Grads,
                                                 bool, bool);
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

// The loss's autograd node. Its edges lead to input, weight and bias; only the loss gets a
// history (the forward's other outputs never require grad).
struct LossBackward final : OpNode {
  Flags flags;
  // Saved: reduction mean or sum, the gradients the forward made (dy = 1), in Flags::made's
  // order; reduction none, input, weight, target and bias (undefined without one), to rerun
  // the pass.
  int64_t ignore_index = 0;
  double label_smoothing = 0, softcap = 0, z_loss_scale = 0;

  std::string name() const override {
    return "jitops::fused_linear_cross_entropy_backward";
  }

protected:
  variable_list backward(const at::Tensor &grad, const variable_list &saved) override {
    auto [grad_input, grad_weight, grad_bias] =
        flags.none ? rerun(saved, grad) : scale(saved, grad);
    return {flags.grads[0] ? grad_input : at::Tensor(), flags.grads[1] ? grad_weight : at::Tensor(),
            flags.grads[2] && flags.has_bias ? grad_bias : at::Tensor()};
  }
  void collect_scalars(CompiledNodeArgs &args) const override {
    args.collect(flags.pack());
    args.collect(ignore_index);
    args.collect(label_smoothing);
    args.collect(softcap);
    args.collect(z_loss_scale);
  }

private:
  // Reduction none: the gradients for the upstream per-row dy, from the fused pass again.
  std::tuple<at::Tensor, at::Tensor, at::Tensor> rerun(const variable_list &t,
                                                       const at::Tensor &dy) const {
    static auto op = op_named<GradsSignature>("jitops::fused_linear_cross_entropy_grads");
    const at::Tensor &bias = t[3];
    return op.call(dy, t[0], t[1], t[2], bias.defined() ? Optional(bias) : std::nullopt,
                   ignore_index, label_smoothing, softcap, z_loss_scale, flags.grads);
  }

  // Reduction mean or sum: the forward's gradients (for dy = 1) scaled by the upstream scalar.
  std::tuple<at::Tensor, at::Tensor, at::Tensor> scale(const variable_list &t,
                                                       const at::Tensor &dy) const {
    static auto op = op_named<ScaleSignature>("jitops::fused_linear_cross_entropy_scale");
    std::array<at::Tensor, 3> g;
    size_t next = 0;
    for (int i = 0; i < 3; ++i)
      if (flags.made(i))
        g[i] = t[next++];
    bool in_place = next > 0 && may_scale_in_place(t[0]);
    for (at::Tensor &x : g) // the op takes three tensors: an empty one for a gradient not made
      x = !x.defined() ? at::empty({0}, dy.options()) : in_place ? x : x.clone();
    op.call(dy, g[0], g[1], g[2]);
    return {g[0], g[1], g[2]};
  }
};

// Whether the op's call below autograd would run its CUDA kernel (forward_kernel) at once: the
// tensors' dispatch keys and this thread's, less autograd's, autocast's (jitops registers no
// autocast kernel: a fallthrough) and BackendSelect (always in this thread's, a fallthrough for
// every op but factories), lead to the CUDA kernel first (no dispatch mode, tensor subclass,
// functionalization or functorch transform comes before it).
bool dispatches_to_cuda(std::initializer_list<const at::Tensor *> tensors) {
  c10::DispatchKeySet keys;
  for (const at::Tensor *t : tensors)
    if (t->defined())
      keys = keys | t->key_set();
  c10::impl::LocalDispatchKeySet local = c10::impl::tls_local_dispatch_key_set();
  keys = (keys | local.included_) - local.excluded_ -
         c10::autograd_dispatch_keyset_with_ADInplaceOrView - c10::autocast_dispatch_keyset -
         c10::DispatchKeySet(c10::DispatchKey::BackendSelect);
  return keys.highestPriorityTypeId() == c10::DispatchKey::CUDA;
}

std::vector<at::Tensor> forward_autograd(const at::Tensor &input, const at::Tensor &weight,
                                         const at::Tensor &target, const Optional &bias,
                                         int64_t ignore_index, double label_smoothing,
                                         double softcap, double z_loss_scale,
                                         c10::string_view reduction, Grads grads, bool lse,
                                         bool shared_gradients) {
  const at::Tensor *bias_or_input = bias.has_value() ? &*bias : &input; // the checks skip none
  refuse_forward_mode(kOp, {&input, &weight, bias_or_input});
  static auto op = op_named<ForwardSignature>("jitops::fused_linear_cross_entropy");
  bool records = records_grad({&input, &weight, bias_or_input});
  std::vector<at::Tensor> out;
  if (dispatches_to_cuda({&input, &weight, &target, bias_or_input})) {
    // What the redispatch would run, without it. The gradients may share an allocation when the
    // node keeps them and the caller drops them (shared_gradients: the direct entry), so that
    // no caller ever sees outputs that alias.
    out = forward_impl(input, weight, target, bias, ignore_index, label_smoothing, softcap,
                       z_loss_scale, reduction, grads, lse, records && shared_gradients);
  } else {
    at::AutoDispatchBelowADInplaceOrView guard;
    out = op.call(input, weight, target, bias, ignore_index, label_smoothing, softcap, z_loss_scale,
                  reduction, grads, lse, false);
  }
  if (!records)
    return out;
  const at::Tensor no_bias;
  const at::Tensor &b = bias.has_value() ? *bias : no_bias;
  auto node = make_node<LossBackward>(input, weight, b);
  node->flags = Flags{reduction == "none", grads, b.defined()};
  if (node->flags.none) {
    for (const at::Tensor *t : {&input, &weight, &target, &b})
      node->save(*t);
    node->ignore_index = ignore_index;
    node->label_smoothing = label_smoothing;
    node->softcap = softcap;
    node->z_loss_scale = z_loss_scale;
  } else {
    for (size_t i = 1 + lse; i < out.size(); ++i) // the gradients
      node->save(out[i]);
  }
  torch::autograd::set_history(out[0], node);
  return out;
}

} // namespace
} // namespace jitops_torch

using namespace jitops_torch;

TORCH_LIBRARY_FRAGMENT(jitops, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  // `grads` says which gradients autograd will want (input, weight, bias). The result is the
  // loss, then each row's lse when `lse`, then (reduction mean or sum) the wanted gradients
  // for dy = 1 in that order, grad_bias only with a bias; with reduction none the backward
  // makes the gradients. `shared_gradients`: the caller drops the gradients it is given (the
  // direct entry), so in an eager call that autograd records, a small call's gradients may
  // share one allocation; other callers get outputs that never alias.
  m.def("fused_linear_cross_entropy(Tensor input, Tensor weight, Tensor target, Tensor? bias, "
        "int ignore_index, float label_smoothing, float softcap, float z_loss_scale, "
        "str reduction, bool[3] grads, bool lse, bool shared_gradients=False) -> Tensor[]",
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
