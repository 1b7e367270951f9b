// The ops' autograd nodes. Each op records its backward as a torch::autograd::Node of its own,
// as PyTorch writes the nodes of its built-in ops, rather than through a
// torch::autograd::Function: no context map of IValues, no metadata per input and output, edges
// only to the inputs that take a gradient, a history on the differentiable output alone. On a
// small op that bookkeeping was a measurable part of a call's host time (bench/NOTES-python.md).
//
// Contract of an OpNode:
// - its edges are the differentiable inputs, in the order its backward returns their gradients
//   (make_node sets them); its one input is the gradient of the op's differentiable output;
// - tensors the backward needs are saved (save), and checked against in-place changes when the
//   backward unpacks them, as a Function's saved tensors are; an output of the op itself is
//   saved after the node becomes its grad_fn, as an output (no reference cycle);
// - the backward calls only operators, so compiled autograd traces it: compiled_args collects
//   the saved tensors, then the node's scalars (collect_scalars), and apply_with_saved swaps
//   them in the same order (swap_scalars: the SymInts, which may be symbolic there);
// - an undefined incoming gradient gives undefined gradients, without running the backward.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>

#include <initializer_list>
#include <memory>
#include <string_view>
#include <type_traits>
#include <vector>

namespace torch::dynamo::autograd {
class CompiledNodeArgs;
class SwapSavedVariables;
} // namespace torch::dynamo::autograd

namespace jitops_torch {

class OpNode : public torch::autograd::Node {
public:
  using CompiledNodeArgs = torch::dynamo::autograd::CompiledNodeArgs;
  using SwapSavedVariables = torch::dynamo::autograd::SwapSavedVariables;
  using variable_list = torch::autograd::variable_list;

  variable_list apply(variable_list &&grads) final;
  void release_variables() final;
  void compiled_args(CompiledNodeArgs &args) const final;
  variable_list apply_with_saved(const variable_list &grads, SwapSavedVariables &swap) final;

  // Saves `tensor` (which may be undefined) for the backward. An output of the op is saved
  // with is_output once the node is its grad_fn.
  void save(const at::Tensor &tensor, bool is_output = false);

protected:
  // The gradients of the node's edges, from the gradient of the op's output (defined) and the
  // saved tensors in save order.
  virtual variable_list backward(const at::Tensor &grad, const variable_list &saved) = 0;
  virtual void collect_scalars(CompiledNodeArgs &args) const = 0;
  virtual void swap_scalars(SwapSavedVariables &swap, bool before);

private:
  std::vector<torch::autograd::SavedVariable> saved_;
  std::vector<bool> is_output_;
};

// Whether any of `inputs` carries a forward-mode tangent (dual level 0).
inline bool has_forward_grad(std::initializer_list<const at::Tensor *> inputs) {
  for (const at::Tensor *t : inputs)
    if (t->defined() && t->_fw_grad(/*level=*/0).defined())
      return true;
  return false;
}

// Forward-mode AD is refused, with an UnsupportedError naming op `op`, rather than its tangents
// dropped. Every autograd kernel checks its inputs first; the op's name is only formed to throw.
[[noreturn]] void refuse_forward_mode(std::string_view op);

inline void refuse_forward_mode(std::string_view op,
                                std::initializer_list<const at::Tensor *> inputs) {
  if (has_forward_grad(inputs))
    refuse_forward_mode(op);
}

// A new node of type N whose edges lead to `inputs` (the tensors that take a gradient, in the
// order N's backward returns them). Under functorch's transforms (torch.func.grad, vmap) it
// refuses, as the C++ Functions these nodes replaced did: they have not been validated there.
void refuse_functorch();

// PyTorch's nodes are owned by std::shared_ptr up to 2.11 and by c10::intrusive_ptr since (its
// Node became an intrusive_ptr_target): the layer builds against either, by that base class.
template <class N>
inline constexpr bool kIntrusiveNodes = std::is_base_of_v<c10::intrusive_ptr_target, N>;
template <class N>
using NodePtr = std::conditional_t<kIntrusiveNodes<N>, c10::intrusive_ptr<N>, std::shared_ptr<N>>;

template <class N, class... Inputs> NodePtr<N> make_node(const Inputs &...inputs) {
  refuse_functorch();
  NodePtr<N> node;
  if constexpr (kIntrusiveNodes<N>)
    node = c10::make_intrusive<N>();
  else // deleteNode (found by argument-dependent lookup) frees a deep graph without recursing
    node = std::shared_ptr<N>(new N(), [](N *n) { deleteNode(n); });
  node->set_next_edges(torch::autograd::collect_next_edges(inputs...));
  return node;
}

} // namespace jitops_torch
