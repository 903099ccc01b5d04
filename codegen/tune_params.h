// TuneParams: how a kernel runs (the schedule), handed to codegen; never part of the kernel IR.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::codegen {

struct TuneParams {
  int vector_width = 0;  // SIMD lanes for the innermost loop; 0 = the backend's choice
  int unroll = 0;        // interleave/unroll factor; 0 = the backend's choice

  bool operator==(const TuneParams&) const = default;
  std::string str() const {
    return "vector_width=" + std::to_string(vector_width) + " unroll=" + std::to_string(unroll);
  }
};

}  // namespace kiln::codegen
