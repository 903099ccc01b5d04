// Kernel-IR analyses the backends share (one implementation, tested IR in / facts out): matmul
// recognition here; free loop variables in ir/kernel_ir.h. A backend adds only its own limits
// (codegen/cpu/matmul_recognizer.h, codegen/gpu/launch_strategy.h).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_set>
#include <vector>

#include "ir/kernel_ir.h"

namespace kiln::kir {

// The reductions reachable from `e`, not looking inside them, each once (`seen` gains every
// expression visited).
void collect_reduces(const Expr* e, std::unordered_set<const Expr*>& seen,
                     std::vector<const Expr*>& out);
// Whether a reduction sits anywhere in `e`.
bool has_reduce(const Expr* e);

// The coefficient c when the integer expression `e` is f(other variables) + c * var (sums,
// differences and products by constants); nullopt when it is not of that form.
std::optional<int64_t> var_coefficient(const Expr* e, int32_t var, const FreeVars& fv);

// How index `e` steps along `var` where it reads the buffer a view stands for: var_coefficient,
// read through min, max, clip and where too (a pad's, a concat's, a clamped index), which step as
// their arm of largest step (a constant steps 0), and through a roll's remainder. A pad along a
// summed row steps 1, as the padded buffer's row would; a pad of a column, clamp(k - b) * C + j,
// steps C. nullopt for anything else (a division, a loaded index).
std::optional<int64_t> view_step(const Expr* e, int32_t var, const FreeVars& fv);

// A matmul with fused prologues and epilogues: every store is store(out[index(parallel vars)],
// epilogue(R)) where R is the kernel's one reduction, Reduce(Sum, f32, [k], Mul(a, b)) over a
// single variable k; `a` does not read the column variable j (the last domain axis), `b` not the
// row variable i (the second-to-last); a, b and the epilogues hold no other reduction, and the
// store indices and epilogues read parallel variables only (an epilogue may also not use R).
struct MatmulPattern {
  const Expr* reduce = nullptr;  // R
  const Expr* a = nullptr;       // row operand: batch vars, i, k
  const Expr* b = nullptr;       // column operand: batch vars, k, j
  int32_t k_var = -1;
  int64_t k_extent = 0;
  int32_t i_var = -1;  // domain.size() - 2
  int32_t j_var = -1;  // domain.size() - 1
};

// nullopt when the kernel is anything else, or malformed (a buffer or dtype that does not match
// its parameter: the generic code paths report those).
// `half`: f16 and bf16 matmuls too (a Sum, in that dtype, of products in it), which only the
// GPU's tensor-core strategy takes (codegen/gpu/launch_strategy.h); KernelFacts::matmul is f32's.
std::optional<MatmulPattern> recognize_matmul(const Kernel& k, const FreeVars& fv,
                                              bool half = false);

// Attention in one kernel (what passes/attention_match.h fuses), domain [batch..., i, e]:
//   out = epilogue(R),  R = Reduce(Sum, f32, [j], Mul(P, V))   (either operand order)
//   P = Div(Exp(Sub(X, M)), S),  M = Reduce(Max, [j1], X'),  S = Reduce(Sum, [j2], Exp(Sub(X'', M)))
// where X, X' and X'' are one logits expression at j, j1 and j2 (equal up to renaming the key
// variable and the variables of the reductions inside), X holds exactly one reduction
//   C = Reduce(Sum, f32, [d], Mul(Q, K))   (the scores)
// with Q reading batch variables, i and d, K batch variables, j and d; the rest of X (a scale, a
// mask, a bias) reads batch variables, i and j, and V batch variables, j and e. Stores are as in
// a matmul: parallel variables and R only. Backends compute it flash-style: per block of query
// rows, key tiles with a running max and sum; the result is Σ_j exp(X_j - m) V_j / Σ_j exp(X_j - m).
struct AttentionPattern {
  const Expr* reduce = nullptr;   // R
  const Expr* probs = nullptr;    // P
  const Expr* value = nullptr;    // V: batch vars, j_var, e_var
  const Expr* logits = nullptr;   // X: batch vars, i_var, j_var (holds `scores`)
  const Expr* scores = nullptr;   // C
  const Expr* query = nullptr;    // Q: batch vars, i_var, d_var
  const Expr* key = nullptr;      // K: batch vars, j_var, d_var
  int32_t i_var = -1;             // domain.size() - 2
  int32_t e_var = -1;             // domain.size() - 1
  int32_t j_var = -1;             // R's variable
  int32_t d_var = -1;             // C's variable
  int64_t keys = 0;               // j's extent
  int32_t keys_slot = -1;         // the run-time size slot j's extent is (-1: fixed)
  int64_t head_dim = 0;           // d's extent
  // X is where(j <= i + offset, ·, -inf) (a causal mask, compared on the loop variables): keys
  // past i + offset are masked for row i, and a key tile past every row's limit can be skipped.
  std::optional<int64_t> causal_offset;
  // Otherwise, X is where(m, ·, -inf) with m reading neither the scores nor the query row nor a
  // reduction (a decoder's where(keys <= pos, ·, -inf), pos read from a buffer): m is a key mask,
  // the same for every row, and a key tile it hides entirely can be skipped.
  const Expr* key_mask = nullptr;
};

std::optional<AttentionPattern> recognize_attention(const Kernel& k, const FreeVars& fv);

}  // namespace kiln::kir
