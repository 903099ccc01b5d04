// Input binding for `kiln run`.
#include "tools/graph_inputs.h"

#include <cmath>
#include <fmt/format.h>
#include <new>
#include <random>

#include "ir/kg.h"
#include "onnx/proto.h"
#include "tools/npy.h"

namespace kiln::tools {

Expected<ir::HostTensor> read_input_file(const std::string& path) {
  if (!path.ends_with(".pb")) return read_npy(path);
  auto bytes = ir::read_text_file(path);
  if (!bytes) return std::unexpected(bytes.error());
  auto t = onnx::parse_tensor(*bytes);
  if (!t) return make_error(fmt::format("'{}': {}", path, t.error().message));
  auto h = onnx::to_host_tensor(*t);
  if (!h) return make_error(fmt::format("'{}': {}", path, h.error().message));
  return h;
}

Expected<std::pair<std::string, std::string>> parse_input_arg(const std::string& arg) {
  auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    return make_error(fmt::format("--input '{}': expected NAME=PATH.npy (or PATH.pb)", arg));
  std::string name = arg.substr(0, eq);
  if (name[0] == '%') name.erase(0, 1);
  return std::pair{name, arg.substr(eq + 1)};
}

Expected<ir::HostTensor> random_tensor(const std::string& name, ir::DType dtype,
                                       const ir::Shape& shape, uint64_t seed) {
  ir::HostTensor t;
  try {
    const double bytes = static_cast<double>(ir::shape_numel(shape)) * ir::dtype_size(dtype);
    if (!ir::HostTensor::fits_in_memory(bytes)) throw std::bad_alloc();
    t = ir::HostTensor::zeros(dtype, shape);
  } catch (const std::bad_alloc&) {
    return make_error(fmt::format(
        "out of memory on the host: cannot allocate {} bytes for --random-inputs of input '%{}' "
        "({}{})",
        static_cast<uint64_t>(ir::shape_numel(shape)) * ir::dtype_size(dtype), name,
        ir::dtype_name(dtype), ir::shape_str(shape)));
  }
  std::mt19937_64 rng(seed);
  int64_t n = t.numel();
  if (ir::is_float(dtype)) {
    // Box-Muller on our own uniform draws: identical streams with every standard library.
    auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53; };
    for (int64_t i = 0; i < n; i += 2) {
      double r = std::sqrt(-2.0 * std::log(uniform())), th = 2.0 * M_PI * uniform();
      t.set(i, r * std::cos(th));
      if (i + 1 < n) t.set(i + 1, r * std::sin(th));
    }
  } else if (dtype == ir::DType::boolean) {
    for (int64_t i = 0; i < n; ++i) t.set(i, static_cast<double>(rng() & 1));
  } else {
    int64_t lo = dtype == ir::DType::u8 ? 0 : -8;
    for (int64_t i = 0; i < n; ++i) t.set(i, static_cast<double>(lo + static_cast<int64_t>(rng() % 17)));
  }
  return t;
}

Expected<std::vector<ir::HostTensor>> load_inputs(const ir::KgGraph& graph, const InputSpec& spec,
                                                  const std::map<std::string, ir::HostTensor>& bound) {
  for (const auto& [name, path] : spec.files) {
    bool known = false;
    for (const auto& in : graph.inputs) known |= in.first == name;
    if (!known) return make_error(fmt::format("--input {}: the graph has no input '%{}'", name, name));
  }
  std::vector<ir::HostTensor> out;
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const auto& [name, node] = graph.inputs[i];
    std::string want = fmt::format("{}{}", ir::dtype_name(node->dtype), ir::shape_str(node->shape));
    auto it = spec.files.find(name);
    if (it == spec.files.end()) {
      if (auto b = bound.find(name); b != bound.end()) {
        out.push_back(b->second);
        continue;
      }
      if (!spec.random)
        return make_error(fmt::format(
            "missing input '%{}' ({}): pass --input {}=PATH.npy (or an ONNX TensorProto PATH.pb) "
            "or --random-inputs",
            name, want, name));
      auto t = random_tensor(name, node->dtype, node->shape, spec.seed * 1000003 + i);
      if (!t) return std::unexpected(t.error());
      out.push_back(std::move(*t));
      continue;
    }
    auto t = read_input_file(it->second);
    if (!t) return std::unexpected(t.error());
    if (t->dtype != node->dtype || t->shape != node->shape) {
      // A size symbol's axis is sized by --dim, not by the file: say which one would take it
      // (where the file differs in such axes only).
      std::string hint;
      const std::vector<std::string> symbols = ir::input_symbols(*node);
      bool fixed_match = t->dtype == node->dtype && t->shape.size() == node->shape.size();
      for (size_t a = 0; fixed_match && a < t->shape.size(); ++a)
        fixed_match = (a < symbols.size() && !symbols[a].empty()) || t->shape[a] == node->shape[a];
      if (fixed_match)
        for (size_t a = 0; a < symbols.size() && a < t->shape.size(); ++a)
          if (!symbols[a].empty() && t->shape[a] != node->shape[a])
            hint += fmt::format("{} --dim {}={}",
                                hint.empty() ? "; to run at the file's size, pass" : ",",
                                symbols[a], t->shape[a]);
      return make_error(fmt::format("input '%{}': expected {}, got {}{} from '{}'{}", name, want,
                                    ir::dtype_name(t->dtype), ir::shape_str(t->shape), it->second,
                                    hint));
    }
    out.push_back(std::move(*t));
  }
  return out;
}

}  // namespace kiln::tools
