// Shared pieces of the GPU launch strategies' body writers (codegen/gpu/gpu_source.cpp and
// codegen/gpu/matmul_writer.cpp): flat-index decomposition, stores, launch limits.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/gpu/c_expr_emitter.h"
#include "codegen/gpu/gpu_source.h"
#include "codegen/gpu/launch_strategy.h"

namespace kiln::codegen::gpu {

using Scope = CExprEmitter::Scope;

inline constexpr int64_t kMaxGroups = 65535;

inline int64_t product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= v[i];
  return n;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Binds loop variables `vars` (extents `dims`, C order) from the flat index `flat`.
inline void bind_flat(CExprEmitter& em, Scope* s, const std::vector<int64_t>& dims,
               const std::vector<int32_t>& vars, const std::string& flat) {
  DialectText& d = em.dialect();
  std::string rest = flat;
  for (size_t i = vars.size(); i-- > 0;) {
    const std::string v = fmt::format("v{}", vars[i]);
    if (i == 0) {
      em.append(s, fmt::format("{} {} = {};", d.i64_type(), v, rest));
    } else {
      em.append(s, fmt::format("{} {} = {} % {};", d.i64_type(), v, rest, d.i64_lit(dims[i])));
      const std::string next = em.fresh("q");
      em.append(s, fmt::format("{} {} = {} / {};", d.i64_type(), next, rest, d.i64_lit(dims[i])));
      rest = next;
    }
    em.bind_var(s, vars[i], v);
  }
}

inline std::vector<int32_t> iota_vars(size_t n) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(i);
  return v;
}

inline Expected<void> emit_stores(CExprEmitter& em, Scope* s, const kir::Kernel& k) {
  for (const kir::Store& st : k.stores)
    if (Expected<void> r = em.emit_store(s, st); !r) return r;
  return {};
}

// A workgroup (or st.splits of them) per row (codegen/gpu/row_reduce_writer.cpp); `shared`
// receives its shared arrays, the dialect its scratch arrays.
Expected<LaunchShape> write_row_reduce(CExprEmitter& em, const kir::Kernel& k, const Strategy& st,
                                       std::string& shared);

// The tiled matmul (codegen/gpu/matmul_writer.cpp) with `tile` x `tile` output tiles (16, 32, 64
// or 128; 0: 64 when both sides reach 64, else 16); `shared` receives its shared arrays.
Expected<LaunchShape> write_matmul(CExprEmitter& em, const kir::Kernel& k,
                                   const kir::MatmulPattern& m, int tile, std::string& shared);

}  // namespace kiln::codegen::gpu
