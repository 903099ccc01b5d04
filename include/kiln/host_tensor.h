// HostTensor: a dense, C-ordered tensor in host memory (what goes in and out of devices and .npy).
#pragma once

#include <cstddef>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/export.h"
#include "kiln/shape.h"

namespace kiln::ir {

struct KILN_EXPORT HostTensor {
  DType dtype = DType::f32;
  Shape shape;
  std::vector<std::byte> bytes;  // numel * dtype_size, little-endian

  static HostTensor zeros(DType dtype, Shape shape);
  // Whether `bytes` could be held in this machine's memory (physical memory plus swap): a larger
  // request is refused up front with an error instead of left to the allocator (which, under
  // AddressSanitizer, aborts on a failed operator new instead of throwing).
  static bool fits_in_memory(double bytes);
  int64_t numel() const { return shape_numel(shape); }
  // Element access through double (exact for every dtype but i64 beyond 2^53).
  // f16/bf16 are converted with round-to-nearest-even; bool stores 0/1; ints truncate toward zero.
  double get(int64_t i) const;
  // Element `i` of an integer or bool tensor exactly (i64 past 2^53 too). Precondition: an
  // integer or bool dtype.
  int64_t get_int(int64_t i) const;
  void set(int64_t i, double v);
  void* data() { return bytes.data(); }
  const void* data() const { return bytes.data(); }
};

}  // namespace kiln::ir
