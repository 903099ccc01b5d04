// Binding a `.kg` graph's inputs from `.npy` files or seeded random data, with clear errors.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/host_tensor.h"
#include "ir/kg.h"
#include "kiln/error.h"

namespace kiln::tools {

struct InputSpec {
  std::map<std::string, std::string> files;  // input name (no '%') -> .npy or .pb path
  bool random = false;                       // fill unbound inputs with seeded random data
  uint64_t seed = 0;
};

// An input file: .npy, or an ONNX TensorProto (.pb, as ONNX's test data sets ship them).
Expected<ir::HostTensor> read_input_file(const std::string& path);

// Parses "NAME=PATH" (a leading '%' on NAME is allowed).
Expected<std::pair<std::string, std::string>> parse_input_arg(const std::string& arg);

// One host tensor per graph input, in declaration order; an input that `spec` does not bind takes
// its tensor from `bound` (a model's own constants) when it is there.
Expected<std::vector<ir::HostTensor>> load_inputs(
    const ir::KgGraph& graph, const InputSpec& spec,
    const std::map<std::string, ir::HostTensor>& bound = {});

// Seeded data for input `name`: normal(0,1) for floats, uniform integers in [-8, 8] (u8: [0, 16]),
// bools p=0.5. More than the host can hold is an error naming the input and the bytes.
Expected<ir::HostTensor> random_tensor(const std::string& name, ir::DType dtype,
                                       const ir::Shape& shape, uint64_t seed);

}  // namespace kiln::tools
