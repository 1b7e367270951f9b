// Scans (jitops/scan.h): cumsum, cumprod, logcumsumexp, cummax, cummin and scan_backward,
// with the autograd formulas of the forward ops.
#include "node.h"
#include "support.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/dynamo/compiled_autograd.h>
#include <torch/library.h>

namespace jitops_torch {
namespace {

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

// `dim` as the library's int axis. The library checks the range, but only of an int: a dim
// beyond int's range would wrap onto a valid axis (2^32 onto 0), so it is refused here with
// the library's status and words.
int axis_of(int64_t dim, const at::Tensor &x, std::string_view name) {
  const int64_t rank = x.dim() > 0 ? x.dim() : 1; // a 0-d tensor scans as [1]
  TORCH_CHECK_VALUE(dim >= INT32_MIN && dim <= INT32_MAX, "[jitops:6] jitops.", name, ": axis ",
                    dim, " is out of range for a tensor of rank ", rank, " (expected ", -rank, "..",
                    rank - 1, ")");
  return static_cast<int>(dim);
}

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
  check(jitops_scan(launch.runtime, op, xv.get(), axis_of(dim, x, name), reverse, yv.get(),
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
                             axis_of(dim, grad, name), reverse, gxv.get(), nullptr, launch.stream),
        name);
  return grad_x;
}

// ---- autograd --------------------------------------------------------------------------------

using Optional = std::optional<at::Tensor>;

// The forward op below autograd, through the dispatcher.
template <class Signature> c10::TypedOperatorHandle<Signature> forward_op(jitops_scan_op op) {
  std::string name = "jitops::" + std::string(name_of(op));
  return c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), "").typed<Signature>();
}

using ValuesSignature = at::Tensor(const at::Tensor &, int64_t, bool);
using IndexedSignature = std::tuple<at::Tensor, at::Tensor>(const at::Tensor &, int64_t, bool);

// d/dx of a scan along `dim`: the backward op, through the dispatcher (under torch.compile it
// is what gets traced). It reads x and y (cumprod, logcumsumexp), the indices (cummax,
// cummin) or nothing (cumsum), as the op's node saved them.
template <jitops_scan_op Op> struct ScanBackward final : OpNode {
  int64_t dim = 0;
  bool reverse = false;

  std::string name() const override {
    return "jitops::" + std::string(name_of(Op)) + "_backward";
  }

protected:
  variable_list backward(const at::Tensor &grad, const variable_list &saved) override {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("jitops::scan_backward", "")
                         .typed<at::Tensor(c10::string_view, const at::Tensor &, const Optional &,
                                           const Optional &, const Optional &, int64_t, bool)>();
    Optional x, y, indices;
    if (has_indices(Op))
      indices = saved[0];
    else if (Op != JITOPS_SCAN_CUMSUM)
      x = saved[0], y = saved[1];
    constexpr std::string_view name = name_of(Op);
    return {op.call(c10::string_view(name.data(), name.size()), grad, x, y, indices, dim, reverse)};
  }
  void collect_scalars(CompiledNodeArgs &args) const override {
    args.collect(dim);
    args.collect(reverse);
  }
};

template <jitops_scan_op Op>
NodePtr<ScanBackward<Op>> scan_node(const at::Tensor &x, int64_t dim, bool reverse) {
  auto node = make_node<ScanBackward<Op>>(x);
  node->dim = dim;
  node->reverse = reverse;
  return node;
}

// cumsum (saves nothing), cumprod and logcumsumexp (x and y).
template <jitops_scan_op Op>
at::Tensor values_autograd(const at::Tensor &x, int64_t dim, bool reverse) {
  static auto op = forward_op<ValuesSignature>(Op);
  refuse_forward_mode(name_of(Op), {&x});
  const bool records = records_grad({&x});
  at::Tensor y;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    y = op.call(x, dim, reverse);
  }
  if (!records)
    return y;
  auto node = scan_node<Op>(x, dim, reverse);
  torch::autograd::set_history(y, node);
  if (Op != JITOPS_SCAN_CUMSUM) {
    node->save(x);
    node->save(y, true);
  }
  return y;
}

// cummax and cummin: the backward routes the gradient to the saved indices (int64, no history).
template <jitops_scan_op Op>
std::tuple<at::Tensor, at::Tensor> indexed_autograd(const at::Tensor &x, int64_t dim,
                                                    bool reverse) {
  static auto op = forward_op<IndexedSignature>(Op);
  refuse_forward_mode(name_of(Op), {&x});
  const bool records = records_grad({&x});
  std::tuple<at::Tensor, at::Tensor> out;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out = op.call(x, dim, reverse);
  }
  if (!records)
    return out;
  auto node = scan_node<Op>(x, dim, reverse);
  torch::autograd::set_history(std::get<0>(out), node);
  node->save(std::get<1>(out));
  return out;
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
