// The ops' autograd nodes (node.h).
#include "node.h"

#include <ATen/FuncTorchTLS.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/dynamo/compiled_autograd.h>

#include <mutex>

namespace jitops_torch {

using torch::autograd::SavedVariable;

OpNode::variable_list OpNode::apply(variable_list &&grads) {
  if (!grads[0].defined()) // no gradient flows into the output: none flows out
    return variable_list(num_outputs());
  std::lock_guard<std::mutex> lock(mutex_);
  variable_list saved;
  saved.reserve(saved_.size());
  for (SavedVariable &v : saved_)
    saved.push_back(v.unpack(getptr()));
  return backward(grads[0], saved);
}

void OpNode::release_variables() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (SavedVariable &v : saved_)
    v.reset_data();
}

void OpNode::compiled_args(CompiledNodeArgs &args) const {
  for (size_t i = 0; i < saved_.size(); ++i)
    args.collect(saved_[i], is_output_[i]);
  collect_scalars(args);
}

OpNode::variable_list OpNode::apply_with_saved(const variable_list &grads,
                                               SwapSavedVariables &swap) {
  for (SavedVariable &v : saved_)
    swap.before(v);
  swap_scalars(swap, true);
  variable_list result = apply(variable_list(grads));
  for (SavedVariable &v : saved_)
    swap.after(v);
  swap_scalars(swap, false);
  return result;
}

void OpNode::save(const at::Tensor &tensor, bool is_output) {
  saved_.emplace_back(tensor, is_output);
  is_output_.push_back(is_output);
}

void OpNode::swap_scalars(SwapSavedVariables &, bool) {}

void refuse_forward_mode(std::string_view op) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "[jitops:13] jitops.", op,
                              ": forward-mode automatic differentiation is not implemented");
}

void refuse_functorch() {
  if (const auto &functorch = at::functorch::functorchTLSAccessor())
    functorch->checkSupportsCppAutogradFunction();
}

} // namespace jitops_torch
