// Scans (jitops/scan.h): cumsum, cumprod, logcumsumexp, cummax, cummin and scan_backward,
// with the autograd formulas of the forward ops.
#include "support.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

namespace jitops_torch {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr std::string_view name_of(jitops_scan_op op) {
  switch (op) {
  case JITOPS_SCAN_CUMSUM:
    return "cumsum";
  case JITOPS_SCAN_CUMPROD:
    return "cumprod";
  case JITOPS_SCAN_CUMMAX:
    return "cummax";
  case JITOPS_SCAN_CUMMIN:
    return "cummin";
  default:
    return "logcumsumexp";
  }
}

jitops_scan_op op_named(std::string_view name) {
  static constexpr std::string_view names[] = {"cumsum", "cumprod", "cummax", "cummin",
                                               "logcumsumexp"}; // jitops_scan_op's order
  return static_cast<jitops_scan_op>(code_of(name, names, "scan_backward", "op"));
}

constexpr bool has_indices(jitops_scan_op op) {
  return op == JITOPS_SCAN_CUMMAX || op == JITOPS_SCAN_CUMMIN;
}

// ---- CUDA kernels --------------------------------------------------------------------------

// y (and int64 indices) shaped like x: the scan along `dim`. A 0-d tensor scans as one
// element.
std::tuple<at::Tensor, at::Tensor> scan(jitops_scan_op op, const at::Tensor &x, int64_t dim,
                                        bool reverse) {
  std::string_view name = name_of(op);
  at::Tensor y = new_output_like(x);
  std::optional<at::Tensor> indices;
  if (has_indices(op))
    indices = new_output_like(x, at::kLong);
  View xv(x, 1), yv(y, 1);
  OptionalView iv(indices, 1);
  Launch launch(x, name);
  check(jitops_scan(launch.runtime, op, xv.get(), static_cast<int>(dim), reverse, yv.get(),
                    iv.get(), nullptr, launch.stream),
        name);
  return {y, indices.value_or(at::Tensor())};
}

template <jitops_scan_op Op>
at::Tensor values_kernel(const at::Tensor &x, int64_t dim, bool reverse) {
  return std::get<0>(scan(Op, x, dim, reverse));
}

template <jitops_scan_op Op>
std::tuple<at::Tensor, at::Tensor> indexed_kernel(const at::Tensor &x, int64_t dim, bool reverse) {
  return scan(Op, x, dim, reverse);
}

at::Tensor backward_kernel(c10::string_view op_name, const at::Tensor &grad,
                           const std::optional<at::Tensor> &x, const std::optional<at::Tensor> &y,
                           const std::optional<at::Tensor> &indices, int64_t dim, bool reverse) {
  jitops_scan_op op = op_named(std::string_view(op_name.data(), op_name.size()));
  std::string name = std::string(name_of(op)) + "_backward";
  at::Tensor grad_x = new_output_like(grad);
  View gv(grad, 1), gxv(grad_x, 1);
  OptionalView xv(x, 1), yv(y, 1), iv(indices, 1);
  Launch launch(grad, name);
  check(jitops_scan_backward(launch.runtime, op, gv.get(), xv.get(), yv.get(), iv.get(),
                             static_cast<int>(dim), reverse, gxv.get(), nullptr, launch.stream),
        name);
  return grad_x;
}

// ---- autograd --------------------------------------------------------------------------------

using Optional = std::optional<at::Tensor>;

// The backward op, through the dispatcher: under torch.compile it is what gets traced.
at::Tensor scan_backward(jitops_scan_op op, const at::Tensor &grad, const Optional &x,
                         const Optional &y, const Optional &indices, AutogradContext *ctx) {
  static auto handle = c10::Dispatcher::singleton()
                           .findSchemaOrThrow("jitops::scan_backward", "")
                           .typed<at::Tensor(c10::string_view, const at::Tensor &, const Optional &,
                                             const Optional &, const Optional &, int64_t, bool)>();
  std::string_view name = name_of(op);
  return handle.call(c10::string_view(name.data(), name.size()), grad, x, y, indices,
                     ctx->saved_data["dim"].toInt(), ctx->saved_data["reverse"].toBool());
}

// The forward op below autograd, through the dispatcher.
template <class Signature> c10::TypedOperatorHandle<Signature> forward_op(jitops_scan_op op) {
  std::string name = "jitops::" + std::string(name_of(op));
  return c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), "").typed<Signature>();
}

// cumsum (reads nothing back), cumprod and logcumsumexp (read x and y).
template <jitops_scan_op Op>
struct ValuesFunction : public torch::autograd::Function<ValuesFunction<Op>> {
  // Its backward calls only operators (traced by compiled autograd, not run opaquely).
  static constexpr bool is_traceable = true;

  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, int64_t dim, bool reverse) {
    static auto op = forward_op<at::Tensor(const at::Tensor &, int64_t, bool)>(Op);
    at::Tensor y;
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      y = op.call(x, dim, reverse);
    }
    if (Op != JITOPS_SCAN_CUMSUM)
      ctx->save_for_backward({x, y});
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["reverse"] = reverse;
    return y;
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    Optional x, y;
    if (Op != JITOPS_SCAN_CUMSUM) {
      variable_list saved = ctx->get_saved_variables();
      x = saved[0];
      y = saved[1];
    }
    return {scan_backward(Op, grads[0], x, y, std::nullopt, ctx), at::Tensor(), at::Tensor()};
  }
};

// cummax and cummin: the backward routes the gradient to the saved indices.
template <jitops_scan_op Op>
struct IndexedFunction : public torch::autograd::Function<IndexedFunction<Op>> {
  // Its backward calls only operators (traced by compiled autograd, not run opaquely).
  static constexpr bool is_traceable = true;

  static variable_list forward(AutogradContext *ctx, const at::Tensor &x, int64_t dim,
                               bool reverse) {
    static auto op =
        forward_op<std::tuple<at::Tensor, at::Tensor>(const at::Tensor &, int64_t, bool)>(Op);
    std::tuple<at::Tensor, at::Tensor> out;
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      out = op.call(x, dim, reverse);
    }
    auto &[values, indices] = out;
    ctx->save_for_backward({indices});
    // The int64 indices are non-differentiable by their type; marking them as well would trip
    // compiled autograd's assert that a C++ Function marks none (CppNode::apply_with_saved).
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["reverse"] = reverse;
    return {values, indices};
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    at::Tensor indices = ctx->get_saved_variables()[0];
    return {scan_backward(Op, grads[0], std::nullopt, std::nullopt, indices, ctx), at::Tensor(),
            at::Tensor()};
  }
};

template <jitops_scan_op Op>
at::Tensor values_autograd(const at::Tensor &x, int64_t dim, bool reverse) {
  if (records_grad({&x}))
    return ValuesFunction<Op>::apply(x, dim, reverse);
  static auto op = forward_op<at::Tensor(const at::Tensor &, int64_t, bool)>(Op);
  at::AutoDispatchBelowADInplaceOrView guard;
  return op.call(x, dim, reverse);
}

template <jitops_scan_op Op>
std::tuple<at::Tensor, at::Tensor> indexed_autograd(const at::Tensor &x, int64_t dim,
                                                    bool reverse) {
  if (!records_grad({&x})) {
    static auto op =
        forward_op<std::tuple<at::Tensor, at::Tensor>(const at::Tensor &, int64_t, bool)>(Op);
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(x, dim, reverse);
  }
  variable_list out = IndexedFunction<Op>::apply(x, dim, reverse);
  return {out[0], out[1]};
}

} // namespace
} // namespace jitops_torch

using namespace jitops_torch;

TORCH_LIBRARY_FRAGMENT(jitops, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  for (const char *op : {"cumsum", "cumprod", "logcumsumexp"})
    m.def((std::string(op) + "(Tensor x, int dim, bool reverse=False) -> Tensor").c_str(), tags);
  for (const char *op : {"cummax", "cummin"})
    m.def((std::string(op) +
           "(Tensor x, int dim, bool reverse=False) -> (Tensor values, Tensor indices)")
              .c_str(),
          tags);
  m.def("scan_backward(str op, Tensor grad, Tensor? x, Tensor? y, Tensor? indices, int dim, "
        "bool reverse) -> Tensor",
        tags);
}

TORCH_LIBRARY_IMPL(jitops, CUDA, m) {
  m.impl("cumsum", &values_kernel<JITOPS_SCAN_CUMSUM>);
  m.impl("cumprod", &values_kernel<JITOPS_SCAN_CUMPROD>);
  m.impl("logcumsumexp", &values_kernel<JITOPS_SCAN_LOGCUMSUMEXP>);
  m.impl("cummax", &indexed_kernel<JITOPS_SCAN_CUMMAX>);
  m.impl("cummin", &indexed_kernel<JITOPS_SCAN_CUMMIN>);
  m.impl("scan_backward", &backward_kernel);
}

TORCH_LIBRARY_IMPL(jitops, Autograd, m) {
  m.impl("cumsum", &values_autograd<JITOPS_SCAN_CUMSUM>);
  m.impl("cumprod", &values_autograd<JITOPS_SCAN_CUMPROD>);
  m.impl("logcumsumexp", &values_autograd<JITOPS_SCAN_LOGCUMSUMEXP>);
  m.impl("cummax", &indexed_autograd<JITOPS_SCAN_CUMMAX>);
  m.impl("cummin", &indexed_autograd<JITOPS_SCAN_CUMMIN>);
}

TORCH_LIBRARY_IMPL(jitops, CPU, m) {
  refuse_cpu_tensors(m, {"cumsum", "cumprod", "logcumsumexp", "cummax", "cummin", "scan_backward"});
}
