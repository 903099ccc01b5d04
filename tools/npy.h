// Reading and writing numpy `.npy` files (format versions 1.0, 2.0, 3.0; little-endian; C order).
#pragma once

#include <string>

#include "kiln/host_tensor.h"
#include "kiln/error.h"

namespace kiln::tools {

// dtypes: f32 f64 f16 i32 i64 i8 u8 bool ('<f4' '<f8' '<f2' '<i4' '<i8' '|i1' '|u1' '|b1').
// Errors name the path and what is wrong (bad magic, unsupported version or dtype, Fortran
// order, big-endian data, truncated data, ...).
Expected<ir::HostTensor> read_npy(const std::string& path);
// Writes atomically (a temporary file renamed into place): no partial file on failure.
Expected<void> write_npy(const std::string& path, const ir::HostTensor& t);

}  // namespace kiln::tools
