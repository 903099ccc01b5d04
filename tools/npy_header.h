// The `.npy` header: the Python dict literal that names dtype, memory order and shape.
#pragma once

#include <string>
#include <string_view>

#include "kiln/host_tensor.h"
#include "kiln/error.h"

namespace kiln::tools::npy {

struct Header {
  ir::DType dtype = ir::DType::f32;
  ir::Shape shape;
  bool fortran = false;  // the data in column-major order (numpy's fortran_order)
};

// Parses "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" followed by padding
// (keys in any order). Errors are phrased without the file name; the caller adds it.
Expected<Header> parse_header(std::string_view text);
// The dict exactly as numpy writes it (before padding), e.g. for f32[2,3] the text above.
// bf16 has no numpy dtype: an error.
Expected<std::string> format_header(ir::DType dtype, const ir::Shape& shape);
// The numpy descr of a dtype ("<f4"); empty for bf16.
std::string_view descr_of(ir::DType dtype);

}  // namespace kiln::tools::npy
