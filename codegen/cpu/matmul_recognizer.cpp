// The cpu backend's matmul kernels: the shared pattern within the emitter's K limit.
#include "codegen/cpu/matmul_recognizer.h"

namespace kiln::codegen::cpu {

std::optional<MatmulPattern> matmul_of(const kir::KernelFacts& facts) {
  const std::optional<MatmulPattern>& p = facts.matmul;
  // The packed operands take K * 256 bytes and more per call: past kMaxMatmulK the generic loop
  // nest is safer.
  if (p && p->k_extent > kMaxMatmulK) return std::nullopt;
  return p;
}

}  // namespace kiln::codegen::cpu
