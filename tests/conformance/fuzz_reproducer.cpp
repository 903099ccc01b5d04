// Writing reproducers of failing fuzz graphs (.kg text plus .npy inputs).
#include "fuzz_reproducer.h"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>

#include "ir/kg.h"
#include "tools/npy.h"

namespace kiln::testing::fuzz {

namespace {

std::string input_name(size_t i) { return fmt::format("in{}", i); }

std::string input_args(const Case& c, const std::string& dir, uint64_t seed) {
  std::string args;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    args += fmt::format(" --input {}={}/seed-{}/{}.npy", input_name(i), dir, seed, input_name(i));
  return args;
}

}  // namespace

std::string reproducer_text(const Case& c, const std::vector<FuzzValue>& outputs, uint64_t seed,
                            const std::string& device, const std::vector<std::string>& problems,
                            const std::string& dir) {
  ir::KgGraph kg;
  for (size_t i = 0; i < c.inputs.size(); ++i) kg.inputs.emplace_back(input_name(i), c.inputs[i].first);
  for (size_t o = 0; o < outputs.size(); ++o) kg.outputs.emplace_back(fmt::format("out{}", o), outputs[o].node);
  std::string text = ir::print_kg(kg);
  std::string head = fmt::format("# kiln fuzz seed {} (KILN_FUZZ_SEED={} KILN_FUZZ_GRAPHS=1), {} vs reference:\n",
                                 seed, seed, device);
  for (std::string p : problems) {
    for (size_t nl; (nl = p.find('\n')) != std::string::npos;) p.replace(nl, 1, " | ");
    head += "#   " + p + "\n";
  }
  for (size_t o = 0; o < outputs.size(); ++o)
    head += fmt::format("# out{}: {}, {}{}\n", o, outputs[o].exact ? "exact" : "rounded",
                        outputs[o].special ? "may hold NaN/inf, " : "",
                        fmt::format("loosest dtype {}", ir::dtype_name(outputs[o].loosest)));
  head += fmt::format("# inputs (not --random-inputs: the fuzz chose them):\n#   kiln run {}/seed-{}.kg{} --device {} --out got\n",
                      dir, seed, input_args(c, dir, seed), device);
  head += fmt::format("#   kiln run {}/seed-{}.kg{} --device reference --out want\n", dir, seed,
                      input_args(c, dir, seed));
  // The header line stays first; the comments follow it.
  size_t eol = text.find('\n');
  return text.substr(0, eol + 1) + head + text.substr(eol + 1);
}

Expected<std::string> write_reproducer(const Case& c, const std::string& text, uint64_t seed,
                                       const std::string& dir) {
  const std::filesystem::path data = std::filesystem::path(dir) / fmt::format("seed-{}", seed);
  std::error_code ec;
  std::filesystem::create_directories(data, ec);
  if (ec) return make_error(fmt::format("cannot create '{}': {}", data.string(), ec.message()));
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (auto w = tools::write_npy((data / (input_name(i) + ".npy")).string(), c.inputs[i].second); !w)
      return std::unexpected(w.error());
  const std::string path = (std::filesystem::path(dir) / fmt::format("seed-{}.kg", seed)).string();
  std::ofstream f(path);
  f << text;
  if (!f) return make_error(fmt::format("cannot write '{}'", path));
  return path;
}

}  // namespace kiln::testing::fuzz
