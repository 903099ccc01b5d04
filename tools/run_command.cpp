// `kiln run`: read a graph, bind inputs, realize the outputs on a device, write or print them.
#include <fmt/format.h>
#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ir/kg.h"
#include "runtime/config.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "support/write_file.h"
#include "tools/commands.h"
#include "tools/graph_file.h"
#include "tools/npy.h"
#include "tools/workload.h"

namespace kiln::tools {

namespace {
// The file an output named `name` is written to under --out: every character but letters,
// digits, '_', '-' and '.' becomes '_' (an ONNX name such as "/model/Relu_output_0", or one that
// would climb out of the directory, stays inside it), and a name of dots alone gets a leading '_'.
std::string npy_file_name(const std::string& name) {
  std::string file;
  for (char ch : name)
    file += std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.'
                ? ch
                : '_';
  if (file.find_first_not_of('.') == std::string::npos) file.insert(0, "_");
  return file + ".npy";
}

// --out's file per output, or an error naming two outputs whose names give one file.
Expected<std::vector<std::string>> npy_file_names(const ir::KgGraph& graph) {
  std::vector<std::string> files;
  for (const auto& [name, node] : graph.outputs) {
    files.push_back(npy_file_name(name));
    for (size_t j = 0; j + 1 < files.size(); ++j)
      if (files[j] == files.back() && graph.outputs[j].first != name)
        return make_error(fmt::format("--out: outputs '{}' and '{}' would both be written to '{}'",
                                      graph.outputs[j].first, name, files.back()));
  }
  return files;
}

// Integers are printed whole (an i64 past 2^53 too: read from its bytes, not through a double),
// and so are their sums where they fit in 64 bits; floats to 6 significant digits.
void print_summary(const std::string& name, const ir::HostTensor& t) {
  const bool integer = !ir::is_float(t.dtype);
  const auto exact = [&](int64_t i) -> __int128 {
    if (t.dtype != ir::DType::i64) return static_cast<__int128>(t.get(i));
    int64_t v;
    std::memcpy(&v, static_cast<const std::byte*>(t.data()) + i * 8, 8);
    return v;
  };
  const auto number = [&](__int128 v, double approx) {
    if (integer && v >= INT64_MIN && v <= INT64_MAX)
      return fmt::format("{}", static_cast<int64_t>(v));
    return fmt::format("{:.6g}", approx);
  };
  double sum = 0, asum = 0;
  __int128 isum = 0, iasum = 0;  // 2^59 elements of at most 2^63 each fit
  for (int64_t i = 0; i < t.numel(); ++i) {
    sum += t.get(i);
    asum += std::abs(t.get(i));
    if (integer) {
      const __int128 v = exact(i);
      isum += v;
      iasum += v < 0 ? -v : v;
    }
  }
  std::string head;
  for (int64_t i = 0; i < std::min<int64_t>(t.numel(), 6); ++i)
    head += fmt::format("{}{}", i ? ", " : "", number(integer ? exact(i) : 0, t.get(i)));
  fmt::print("%{} : {}{} = [{}{}]  sum={} abs_sum={}\n", name, ir::dtype_name(t.dtype),
             ir::shape_str(t.shape), head, t.numel() > 6 ? ", ..." : "", number(isum, sum),
             number(iasum, asum));
}

// The achieved rates of one kernel: GB/s and GFLOP/s, and their fractions of the device's limits.
struct Achieved {
  double gbs = 0, gflops = 0, of_bandwidth = 0, of_compute = 0;
};
Achieved achieved(const runtime::KernelRunInfo& k, const runtime::RunStats& s) {
  Achieved a;
  if (k.ms <= 0) return a;
  a.gbs = k.bytes / (k.ms * 1e6);
  a.gflops = k.flops / (k.ms * 1e6);
  if (s.bandwidth > 0) a.of_bandwidth = a.gbs * 1e9 / s.bandwidth;
  const double peak = k.peak_flops > 0 ? k.peak_flops : s.compute_rate;
  if (peak > 0) a.of_compute = a.gflops * 1e9 / peak;
  return a;
}

// Each kernel's time (the median over the repeats when there are several), its share of the
// kernels' total, and what it achieved against the device's limits.
void print_kernel_profile(const runtime::RunStats& s, int repeat) {
  double total = 0;
  for (const auto& k : s.groups) total += k.ms;
  if (s.groups.empty() || total <= 0) return;
  const bool contraction = std::ranges::any_of(
      s.groups, [&](const auto& k) { return k.peak_flops > 0 && k.peak_flops != s.compute_rate; });
  fmt::print("kernel time{}; limits {:.1f} GB/s, {:.1f} GFLOP/s{} ({}):\n",
             repeat > 1 ? fmt::format(" (median of {})", repeat) : "", s.bandwidth / 1e9,
             s.compute_rate / 1e9,
             contraction ? fmt::format(", {:.1f} GFLOP/s in matmul and attention kernels",
                                       s.matmul_rate / 1e9)
                         : "",
             s.rates_measured ? "measured on this machine" : "the target's reference rates");
  fmt::print("  {:<10} {:>10} {:>7} {:>9} {:>6} {:>9} {:>6}\n", "kernel", "ms", "share", "GB/s",
             "of bw", "GFLOP/s", "of pk");
  for (const auto& k : s.groups) {
    const Achieved a = achieved(k, s);
    fmt::print("  {:<10} {:>10.4f} {:>6.1f}% {:>9.2f} {:>5.0f}% {:>9.2f} {:>5.0f}%\n", k.name, k.ms,
               100 * k.ms / total, a.gbs, 100 * a.of_bandwidth, a.gflops, 100 * a.of_compute);
  }
}

void print_stats(const RepeatedRun& ran, int repeat) {
  const runtime::RunStats& s = ran.stats;
  const runtime::RunStats& last = ran.last;
  fmt::print("kernels: {} launched, {} compiled\n", s.kernels, s.compiled);
  if (s.tuned > 0) fmt::print("autotune: {} kernel{} tuned\n", s.tuned, s.tuned == 1 ? "" : "s");
  if (!s.plan_source.empty())
    fmt::print("cache: plan {}, {} kernel hit{}, {} miss{}\n",
               s.plan_source == "built"      ? "built"
               : s.plan_source == "symbolic" ? "instantiated from its symbolic plan"
                                             : "from " + s.plan_source, s.cache_hits,
               s.cache_hits == 1 ? "" : "s", s.cache_misses, s.cache_misses == 1 ? "" : "es");
  for (const std::string& why : s.miss_reasons) fmt::print("  miss {}\n", why);
  if (s.dynamic_kernels > 0)
    fmt::print("shapes: {} of {} kernel{} dynamic (sizes at run time)\n", s.dynamic_kernels,
               s.kernels, s.kernels == 1 ? "" : "s");
  for (const std::string& why : s.recompile_reasons) fmt::print("  recompile: {}\n", why);
  for (const auto& g : s.groups)
    fmt::print("  {}: {} op{}: {}\n", g.name, g.num_ops, g.num_ops == 1 ? "" : "s",
               fmt::join(g.values, " "));
  fmt::print("compile: {:.2f} ms (plan {:.2f} ms)\n", s.compile_ms, s.plan_ms);
  if (s.upload_bytes > 0 || s.download_bytes > 0)
    fmt::print("transfers: {} bytes to the device, {} bytes back{}\n", s.upload_bytes,
               s.download_bytes,
               repeat > 1 ? fmt::format(" (last run: {} to the device)", last.upload_bytes) : "");
  fmt::print("run: {:.3f} ms{}\n", s.run_ms, repeat > 1 ? fmt::format(" (median of {})", repeat) : "");
  // The first run against the steady state: fresh outputs are faulted in (compilation is not in
  // either time).
  if (repeat > 1)
    fmt::print("first run: {:.3f} ms, {:.2f}x the median{}\n", ran.first_run_ms,
               s.run_ms > 0 ? ran.first_run_ms / s.run_ms : 0.0,
               ran.first_page_faults >= 0
                   ? fmt::format("; page faults: {} in the first run, {} in the median", ran.first_page_faults,
                                 ran.median_page_faults)
                   : "");
  else if (ran.first_page_faults >= 0)
    fmt::print("page faults: {}\n", ran.first_page_faults);
  if (s.device_ms > 0)
    fmt::print("device: {:.3f} ms in kernels{}\n", s.device_ms,
               repeat > 1 ? fmt::format(" (median of {})", repeat) : "");
  fmt::print("overhead: key {:.1f} µs, plan lookup {:.1f} µs, outside the kernels {:.1f} µs{}\n",
             s.key_ms * 1e3, s.lookup_ms * 1e3, std::max(0.0, s.run_ms - s.device_ms) * 1e3,
             repeat > 1 ? fmt::format(" (medians of {})", repeat) : "");
  print_kernel_profile(s, repeat);
}

Expected<void> write_stats_json(const std::string& path, const RepeatedRun& ran) {
  const runtime::RunStats& s = ran.stats;
  nlohmann::json j;
  j["kernels"] = s.kernels;
  j["compiled"] = s.compiled;
  j["tuned"] = s.tuned;
  j["compile_ms"] = s.compile_ms;
  j["plan_ms"] = s.plan_ms;
  j["run_ms"] = s.run_ms;
  j["first_run_ms"] = ran.first_run_ms;
  j["page_faults"] = {{"first_run", ran.first_page_faults}, {"median_run", ran.median_page_faults}};
  j["device_ms"] = s.device_ms;
  j["key_ms"] = s.key_ms;
  j["lookup_ms"] = s.lookup_ms;
  j["plan_source"] = s.plan_source;
  j["cache_hits"] = s.cache_hits;
  j["cache_misses"] = s.cache_misses;
  j["miss_reasons"] = s.miss_reasons;
  j["recompile_reasons"] = s.recompile_reasons;
  j["dynamic_kernels"] = s.dynamic_kernels;
  j["upload_bytes"] = s.upload_bytes;
  j["download_bytes"] = s.download_bytes;
  j["groups"] = nlohmann::json::array();
  j["kernel_names"] = nlohmann::json::array();
  double total = 0;
  for (const auto& g : s.groups) {
    j["groups"].push_back(g.values);
    j["kernel_names"].push_back(g.name);
    total += g.ms;
  }
  // Per kernel (the median over --repeat), as --stats prints it.
  j["kernel_profile"] = nlohmann::json::array();
  for (const auto& g : s.groups) {
    const Achieved a = achieved(g, s);
    j["kernel_profile"].push_back({{"name", g.name},
                                   {"ms", g.ms},
                                   {"share", total > 0 ? g.ms / total : 0.0},
                                   {"bytes", g.bytes},
                                   {"flops", g.flops},
                                   {"gb_per_s", a.gbs},
                                   {"gflop_per_s", a.gflops},
                                   {"of_bandwidth", a.of_bandwidth},
                                   {"of_compute", a.of_compute},
                                   {"peak_gflop_per_s", (g.peak_flops > 0 ? g.peak_flops : s.compute_rate) / 1e9}});
  }
  j["limits"] = {{"bandwidth_gb_per_s", s.bandwidth / 1e9},
                 {"gflop_per_s", s.compute_rate / 1e9},
                 {"matmul_gflop_per_s", s.matmul_rate / 1e9},
                 {"measured", s.rates_measured}};
  return write_file(path, j.dump(2) + "\n");
}
}  // namespace

int run_command(const RunOptions& o) {
  ir::Graph g;
  auto file = read_graph_file(g, o.graph_path, &o.inputs, &o.sizes);
  if (!file) return report_error(file.error().message);
  ir::KgGraph* graph = &file->graph;
  auto host = load_inputs(*graph, o.inputs, file->constants);
  if (!host) return report_error(host.error().message);
  auto beam = beam_options(o.fusion);
  if (!beam) return report_error(beam.error().message);
  auto config = runtime::load_config(std::filesystem::current_path().string());
  if (!config) return report_error(config.error().message);
  for (const std::string& w : config->warnings) fmt::print(stderr, "{}\n", w);
  auto options = runtime::device_options_from_config(config->config);
  if (!options) return report_error(options.error().message);
  options->namer = runtime::kg_value_namer(*graph);
  options->autotune = autotune_from(o.autotune, o.no_autotune, options->autotune);
  options->time_kernels = o.stats || !o.stats_json.empty();
  // Command-line fuser flags win over kiln.toml.
  if (o.fusion.fuser_given) options->fuser = *passes::parse_fuser_kind(o.fusion.fuser);  // CLI11 checked it
  if (o.fusion.fuser_given || o.fusion.max_blocks || o.fusion.beam_width) options->beam = *beam;
  auto device = runtime::open_device(o.device, std::move(*options));
  if (!device) return report_error(device.error().message);

  auto bindings = bind_inputs(**device, *graph, *host);
  if (!bindings) return report_error(bindings.error().message);
  if (auto* executor = dynamic_cast<runtime::Executor*>(device->get()))
    note_inner_sizes(*executor, o.graph_path, *graph);
  const std::vector<const ir::Node*> outputs = graph->output_nodes();
  auto files = npy_file_names(*graph);
  if (!files) return report_error(files.error().message);

  auto ran = run_repeated(**device, g, outputs, *bindings, o.repeat);
  if (!ran) return report_error(ran.error().message);
  const std::vector<std::shared_ptr<runtime::Buffer>>& results = ran->results;

  if (!o.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.out_dir, ec);
    if (ec) return report_error(fmt::format("cannot create '{}': {}", o.out_dir, ec.message()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    ir::HostTensor t = results[i]->to_host();
    const std::string& name = graph->outputs[i].first;
    if (o.out_dir.empty()) {
      print_summary(name, t);
    } else if (auto w = write_npy((std::filesystem::path(o.out_dir) / (*files)[i]).string(), t);
               !w) {
      return report_error(w.error().message);
    }
  }
  if (o.stats) print_stats(*ran, o.repeat);
  if (!o.stats_json.empty())
    if (auto w = write_stats_json(o.stats_json, *ran); !w) return report_error(w.error().message);
  return 0;
}

}  // namespace kiln::tools
