// Segment reductions (jitops/segment.h): segment_reduce, segment_reduce_counted (which also
// counts the ids >= num_segments) and segment_reduce_backward, with the forward ops' autograd
// formulas.
#include "node.h"
#include "support.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <torch/csrc/dynamo/compiled_autograd.h>
#include <torch/library.h>

namespace jitops_torch {
namespace {

using torch::autograd::variable_list;

constexpr std::string_view kReductions[] = {"sum", "mean", "max", "min"}; // C's order

jitops_segment_reduction reduction_of(c10::string_view name, std::string_view op) {
  return static_cast<jitops_segment_reduction>(
      code_of(std::string_view(name.data(), name.size()), kReductions, op, "reduction"));
}

std::string op_name(c10::string_view reduction, const char *suffix = "") {
  return "segment_" + std::string(reduction.data(), reduction.size()) + suffix;
}

// out [num_segments, data.shape[1:]]; `dropped`, when given, counts the ids >= num_segments.
// The ids the library may read: host ids in page-locked memory go through a pageable copy.
// The library copies host ids to the device on the op's stream; from pageable memory that
// transfer is staged before the call returns, but from page-locked memory it still reads the
// caller's buffer afterwards, so a caller who refills or frees the tensor right after the call
// (a pinned batch loader does) would change the ids the op sees. Under stream capture they are
// passed as they are: a graph reads its host buffers when it replays, and a pageable copy cannot
// be captured. Call it with the op's device current (after Launch).
at::Tensor ids_read_before_return(const at::Tensor &ids) {
  if (!ids.is_cpu() || !ids.is_pinned() ||
      c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None)
    return ids;
  at::Tensor pageable = at::empty(ids.sizes(), ids.options().pinned_memory(false));
  return pageable.copy_(ids);
}

at::Tensor reduce(const at::Tensor &data, const at::Tensor &ids, int64_t num_segments,
                  c10::string_view reduction, bool sorted, std::optional<double> fill,
                  const std::optional<at::Tensor> &dropped) {
  std::string name = op_name(reduction);
  jitops_segment_reduction code = reduction_of(reduction, name);
  TORCH_CHECK_VALUE(data.dim() >= 1, "[jitops:2] jitops.", name,
                    ": data must have rank >= 1 (rows first)");
  TORCH_CHECK_VALUE(num_segments >= 0, "[jitops:1] jitops.", name, ": num_segments is ",
                    num_segments, ", negative");
  std::vector<int64_t> shape = data.sizes().vec();
  shape[0] = num_segments;
  at::Tensor out = new_output(shape, data.options());
  Launch launch(data, name);
  const at::Tensor read_ids = ids_read_before_return(ids);
  View dv(data), iv(read_ids), ov(out);
  OptionalView cv(dropped);
  jitops_segment_options options;
  jitops_segment_options_init(&options);
  options.sorted = sorted;
  options.has_fill = fill.has_value();
  options.fill = fill.value_or(0.0);
  options.dropped_count = cv.get();
  check(jitops_segment_reduce(launch.runtime, code, dv.get(), iv.get(), num_segments, ov.get(),
                              &options, nullptr, launch.stream),
        name);
  return out;
}

at::Tensor reduce_kernel(const at::Tensor &data, const at::Tensor &ids, c10::SymInt num_segments,
                         c10::string_view reduction, bool sorted, std::optional<double> fill) {
  return reduce(data, ids, num_segments.expect_int(), reduction, sorted, fill, std::nullopt);
}

std::tuple<at::Tensor, at::Tensor> counted_kernel(const at::Tensor &data, const at::Tensor &ids,
                                                  c10::SymInt num_segments,
                                                  c10::string_view reduction, bool sorted,
                                                  std::optional<double> fill) {
  at::Tensor dropped = at::zeros({}, data.options().dtype(at::kLong));
  at::Tensor out = reduce(data, ids, num_segments.expect_int(), reduction, sorted, fill, dropped);
  return {out, dropped};
}

// grad_data [ids.shape[0], grad.shape[1:]]: data and out are needed for max and min only.
at::Tensor backward_kernel(const at::Tensor &grad, const std::optional<at::Tensor> &data,
                           const std::optional<at::Tensor> &out, const at::Tensor &ids,
                           c10::SymInt sym_num_segments, c10::string_view reduction, bool sorted) {
  std::string name = op_name(reduction, "_backward");
  jitops_segment_reduction code = reduction_of(reduction, name);
  int64_t num_segments = sym_num_segments.expect_int();
  std::vector<int64_t> shape = grad.sizes().vec();
  TORCH_CHECK_VALUE(!shape.empty() && ids.dim() == 1, "[jitops:2] jitops.", name,
                    ": grad must have rank >= 1 and segment_ids rank 1");
  shape[0] = ids.size(0);
  at::Tensor grad_data = new_output(shape, grad.options());
  Launch launch(grad, name);
  const at::Tensor read_ids = ids_read_before_return(ids);
  View gv(grad), iv(read_ids), gdv(grad_data);
  OptionalView dv(data), ov(out);
  jitops_segment_options options;
  jitops_segment_options_init(&options);
  options.sorted = sorted;
  check(jitops_segment_reduce_backward(launch.runtime, code, gv.get(), dv.get(), ov.get(), iv.get(),
                                       num_segments, gdv.get(), &options, nullptr, launch.stream),
        name);
  return grad_data;
}

// ---- autograd --------------------------------------------------------------------------------

using Optional = std::optional<at::Tensor>;
using ReduceSignature = at::Tensor(const at::Tensor &, const at::Tensor &, c10::SymInt,
                                   c10::string_view, bool, std::optional<double>);
using CountedSignature = std::tuple<at::Tensor, at::Tensor>(const at::Tensor &, const at::Tensor &,
                                                            c10::SymInt, c10::string_view, bool,
                                                            std::optional<double>);

c10::TypedOperatorHandle<ReduceSignature> &reduce_op() {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("jitops::segment_reduce", "")
                       .typed<ReduceSignature>();
  return op;
}

c10::TypedOperatorHandle<CountedSignature> &counted_op() {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("jitops::segment_reduce_counted", "")
                       .typed<CountedSignature>();
  return op;
}

// d/d data of a segment reduction: the backward op, through the dispatcher. It reads the ids,
// and for max and min the data and the result, as the op's node saved them.
struct SegmentBackward final : OpNode {
  c10::SymInt num_segments;
  std::string reduction;
  bool sorted = false;

  std::string name() const override {
    return "jitops::" + op_name(reduction, "_backward");
  }

protected:
  variable_list backward(const at::Tensor &grad, const variable_list &saved) override {
    static auto op =
        c10::Dispatcher::singleton()
            .findSchemaOrThrow("jitops::segment_reduce_backward", "")
            .typed<at::Tensor(const at::Tensor &, const Optional &, const Optional &,
                              const at::Tensor &, c10::SymInt, c10::string_view, bool)>();
    auto optional = [](const at::Tensor &t) { return t.defined() ? Optional(t) : std::nullopt; };
    // The library reads rows of grad whole: autograd may pass an expanded one (the backward
    // of a sum is a stride-0 view).
    return {op.call(grad.contiguous(), optional(saved[1]), optional(saved[2]), saved[0],
                    num_segments, reduction, sorted)};
  }
  void collect_scalars(CompiledNodeArgs &args) const override {
    args.collect(num_segments);
    args.collect(reduction);
    args.collect(sorted);
  }
  void swap_scalars(SwapSavedVariables &swap, bool before) override {
    before ? swap.before(num_segments) : swap.after(num_segments);
  }
};

// Makes `out` the history of the call: the ids, and for max and min the data and `out` itself,
// are saved.
void record(const at::Tensor &data, const at::Tensor &ids, at::Tensor &out,
            const c10::SymInt &num_segments, c10::string_view reduction, bool sorted) {
  auto node = make_node<SegmentBackward>(data);
  node->num_segments = num_segments;
  node->reduction = std::string(reduction.data(), reduction.size());
  node->sorted = sorted;
  torch::autograd::set_history(out, node);
  const bool extremum = reduction == "max" || reduction == "min";
  node->save(ids);
  node->save(extremum ? data : at::Tensor());
  node->save(extremum ? out : at::Tensor(), true);
}

at::Tensor reduce_autograd(const at::Tensor &data, const at::Tensor &ids, c10::SymInt num_segments,
                           c10::string_view reduction, bool sorted, std::optional<double> fill) {
  if (has_forward_grad({&data})) // the name is formed only to throw
    refuse_forward_mode(op_name(reduction));
  const bool records = records_grad({&data});
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out = reduce_op().call(data, ids, num_segments, reduction, sorted, fill);
  }
  if (records)
    record(data, ids, out, num_segments, reduction, sorted);
  return out;
}

// The int64 count has no history.
std::tuple<at::Tensor, at::Tensor> counted_autograd(const at::Tensor &data, const at::Tensor &ids,
                                                    c10::SymInt num_segments,
                                                    c10::string_view reduction, bool sorted,
                                                    std::optional<double> fill) {
  if (has_forward_grad({&data})) // the name is formed only to throw
    refuse_forward_mode(op_name(reduction));
  const bool records = records_grad({&data});
  std::tuple<at::Tensor, at::Tensor> result;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    result = counted_op().call(data, ids, num_segments, reduction, sorted, fill);
  }
  if (records)
    record(data, ids, std::get<0>(result), num_segments, reduction, sorted);
  return result;
}

} // namespace
} // namespace jitops_torch

using namespace jitops_torch;

TORCH_LIBRARY_FRAGMENT(jitops, m) {
  const std::vector<at::Tag> tags{at::Tag::pt2_compliant_tag};
  m.def("segment_reduce(Tensor data, Tensor segment_ids, SymInt num_segments, str reduction, "
        "bool sorted, float? fill) -> Tensor",
        tags);
  m.def("segment_reduce_counted(Tensor data, Tensor segment_ids, SymInt num_segments, "
        "str reduction, bool sorted, float? fill) -> (Tensor out, Tensor dropped)",
        tags);
  m.def("segment_reduce_backward(Tensor grad, Tensor? data, Tensor? out, Tensor segment_ids, "
        "SymInt num_segments, str reduction, bool sorted) -> Tensor",
        tags);
}

TORCH_LIBRARY_IMPL(jitops, CUDA, m) {
  m.impl("segment_reduce", &reduce_kernel);
  m.impl("segment_reduce_counted", &counted_kernel);
  m.impl("segment_reduce_backward", &backward_kernel);
}

TORCH_LIBRARY_IMPL(jitops, Autograd, m) {
  m.impl("segment_reduce", &reduce_autograd);
  m.impl("segment_reduce_counted", &counted_autograd);
}

TORCH_LIBRARY_IMPL(jitops, CPU, m) {
  refuse_cpu_tensors(m, {"segment_reduce", "segment_reduce_counted", "segment_reduce_backward"});
}
