// Attention in the graph: y = matmul(softmax(logits(matmul(q, kᵀ)), last axis), v), where the
// logits are elementwise ops over the scores (a scale, a mask, a bias), whether it came from the
// `attention` composite (ir/builder_composite.cpp) or from the same ops written out one by one.
// The fuser computes such a y in one kernel (every node of the match in y's group); the kernel IR
// it lowers to (nested reductions) is what the backends recognize as an attention kernel
// (ir/kernel_analysis.h, recognize_attention) and emit flash-style: key tiles, online softmax.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "ir/graph.h"

namespace kiln::passes {

struct AttentionMatch {
  const ir::Node* out = nullptr;     // matmul(p, v): the value the kernel writes
  const ir::Node* scores = nullptr;  // matmul(q, kᵀ)
  // The nodes computed for `out` only, `out` excluded: the softmax (max, sub, exp, sum, div), the
  // logits from `scores` up, `scores` itself, and the elementwise operands of the logits (a mask
  // built from aranges) that `extra` allows. Sorted by id.
  std::vector<const ir::Node*> interior;
  // The logits hold where(cond, ·, -inf) with cond computed from sources (aranges) only: the
  // masked half of a causal mask is skipped, and the cost model counts half the work.
  bool causal = false;
  int64_t batch = 1;     // product of out's batch axes
  int64_t queries = 0;   // rows of the scores
  int64_t keys = 0;      // columns of the scores (the softmax axis)
  int64_t head_dim = 0;  // the contraction of q kᵀ
  int64_t value_dim = 0; // columns of out
};

// The match with `out` as the attention's output, or nullopt. Every node of the softmax and of
// the logits' chain from `scores` must satisfy `inside` (it may be computed in out's kernel);
// other elementwise, movement and source operands of the logits join `interior` where `inside`
// allows them, and are read from buffers otherwise. f32 only (the kernels' dtype).
std::optional<AttentionMatch> match_attention(
    const ir::Node* out, const std::function<bool(const ir::Node*)>& inside);

// Multiply-adds, exponentials and logit evaluations of the matched kernel, counted once each
// (flash-style: the scores are never re-contracted), a causal mask's skipped half left out.
struct AttentionWork {
  double contraction_flops = 0;  // 2 per multiply-add of q kᵀ and p v
  double exps = 0;               // one per score evaluated, plus the running rescales
  double logits = 0;             // score elements evaluated
};
AttentionWork attention_work(const AttentionMatch& m);

}  // namespace kiln::passes
