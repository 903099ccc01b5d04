// Batch sizes FIRST..FIRST+COUNT-1 through one MLP graph (examples/mlp_batch.kg, batch dimension
// `?b`) in one process, under each shape policy (docs/dynamic-shapes.md): how many plans each
// builds, how many come from the graph's symbolic plan, how many kernels it compiles, and the
// median time of a call at a new size (plan built, or symbolic) against a call at a size seen
// before. bench/dynamic_batch.sh runs one process per size instead (the persistent cache's view).
//   kiln_dynamic_batch GRAPH.kg [FIRST] [COUNT] [DEVICE]   (DEVICE: cpu, vulkan:0, cuda:0)
#include <kiln/kiln.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::vector<float> random_values(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::string cell(const std::vector<double>& ms) {
  return ms.empty() ? "-" : fmt::format("{:.3f} ({})", median(ms), ms.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: kiln_dynamic_batch GRAPH.kg [FIRST] [COUNT] [DEVICE]\n");
    return 2;
  }
  const int64_t first = argc > 2 ? std::stoll(argv[2]) : 1;
  const int64_t count = argc > 3 ? std::stoll(argv[3]) : 100;
  const std::string device = argc > 4 ? argv[4] : "cpu";
  auto graph = kiln::Graph::load(argv[1]);
  if (!graph) {
    fmt::print(stderr, "{}\n", graph.error().message);
    return 1;
  }
  fmt::print("batch sizes {}..{} in one process on {}; times are medians in ms (count)\n", first,
             first + count - 1, device);
  fmt::print("{:<10} {:>6} {:>9} {:>9} {:>16} {:>16} {:>16}\n", "policy", "built", "symbolic",
             "compiled", "new size, built", "new size, symb.", "size seen");
  for (const char* policy : {"static", "automatic", "dynamic"}) {
    auto dev = kiln::Device::open(device, kiln::Options{.settings = {{"shapes.policy", policy},
                                                                     {"compilation.cache", "none"},
                                                                     {"autotune.enabled", "false"}},
                                                        .use_config = false,
                                                        .config_dir = ""});
    if (!dev) {
      fmt::print(stderr, "{}\n", dev.error().message);
      return 1;
    }
    // The weights: every input but the first (the batch), at their declared shapes.
    std::mt19937 rng(7);
    const std::vector<kiln::GraphInput> declared = graph->inputs();
    std::vector<kiln::Tensor> weights;
    for (size_t i = 1; i < declared.size(); ++i) {
      const std::vector<float> w = random_values(static_cast<size_t>(kiln::ir::shape_numel(declared[i].shape)), rng);
      weights.push_back(kiln::Tensor::from_host(*dev, std::span<const float>(w), declared[i].shape));
    }
    int built = 0, symbolic = 0, compiled = 0;
    std::vector<double> built_ms, symbolic_ms, seen_ms;
    for (int64_t b = first; b < first + count; ++b) {
      kiln::Shape xs = declared[0].shape;
      xs[0] = b;
      const std::vector<float> x = random_values(static_cast<size_t>(kiln::ir::shape_numel(xs)), rng);
      std::vector<kiln::Tensor> args{kiln::Tensor::from_host(*dev, std::span<const float>(x), xs)};
      args.insert(args.end(), weights.begin(), weights.end());
      for (int call = 0; call < 2; ++call) {
        const auto t0 = std::chrono::steady_clock::now();
        auto out = graph->call(*dev, args);
        auto done = out ? (*out)[0].realize() : kiln::Expected<void>(std::unexpected(out.error()));
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (!done) {
          fmt::print(stderr, "b={}: {}\n", b, done.error().message);
          return 1;
        }
        const kiln::RealizeStats s = dev->last_stats();
        compiled += s.compiled;
        if (s.plan_source == "built") ++built, built_ms.push_back(ms);
        else if (s.plan_source == "symbolic") ++symbolic, symbolic_ms.push_back(ms);
        else if (call == 1) seen_ms.push_back(ms);
      }
    }
    fmt::print("{:<10} {:>6} {:>9} {:>9} {:>16} {:>16} {:>16}\n", policy, built, symbolic, compiled,
               cell(built_ms), cell(symbolic_ms), cell(seen_ms));
  }
  return 0;
}
