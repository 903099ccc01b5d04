// Running fuzz graphs and comparing their outputs (see fuzz_compare.h for the rules).
#include "fuzz_compare.h"

#include <cmath>
#include <fmt/format.h>
#include <unordered_map>

#include "passes/passes.h"

namespace kiln::testing::fuzz {

RunResult run_on(runtime::Device& device, Case& c, const std::vector<const ir::Node*>& outputs) {
  runtime::Bindings in;
  for (auto& [node, host] : c.inputs) in[node] = device.pool()->from_host(host).value();
  RunResult r;
  auto got = device.execute(c.graph, outputs, in);
  if (!got) {
    r.error = got.error().message;
    return r;
  }
  for (const auto& buffer : *got) r.outputs.push_back(buffer->to_host());
  return r;
}

namespace {

// The largest finite magnitude of `t` (at least 1): what rounding errors are relative to.
double magnitude(const ir::HostTensor& t) {
  double m = 1;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (std::isfinite(t.get(i))) m = std::max(m, std::abs(t.get(i)));
  return m;
}

bool agree(double a, double b, double tol, bool check_zero_sign) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (a == b) return a != 0 || !check_zero_sign || std::signbit(a) == std::signbit(b);
  return std::abs(a - b) <= tol;
}

void compare_output(size_t o, const FuzzValue& v, double scale, const ir::HostTensor& got, const ir::HostTensor& want,
                    const std::string& got_name, std::vector<std::string>& problems) {
  if (got.dtype != want.dtype || got.shape != want.shape) {
    problems.push_back(fmt::format("out{}: {} gave {}{}, reference {}{}", o, got_name,
                                   ir::dtype_name(got.dtype), ir::shape_str(got.shape),
                                   ir::dtype_name(want.dtype), ir::shape_str(want.shape)));
    return;
  }
  const bool exact = v.exact;
  const bool zero_sign = exact && v.zero_sign && ir::is_float(want.dtype);
  const double tol = exact ? 0 : fuzz_tolerance(looser(v.loosest, want.dtype)) *
                                     std::max(magnitude(want), scale);
  int bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    if (agree(got.get(i), want.get(i), tol, zero_sign)) continue;
    if (++bad <= 4)
      problems.push_back(fmt::format("out{} ({}{}, {}) element {}: {} {} reference {} (tolerance {:.3g})", o,
                                     ir::dtype_name(want.dtype), ir::shape_str(want.shape),
                                     exact ? "exact" : "rounded", i, got_name, got.get(i), want.get(i), tol));
  }
  if (bad > 4) problems.push_back(fmt::format("out{}: {} elements of {} differ", o, bad, want.numel()));
}

}  // namespace

std::vector<double> history_scales(Case& c, const std::vector<const ir::Node*>& outputs) {
  const std::vector<const ir::Node*> live = passes::live_nodes(outputs);
  RunResult all = run_on(reference_device(), c, live);
  std::unordered_map<const ir::Node*, double> scale;  // of each node's history, in topo order
  for (size_t i = 0; i < live.size(); ++i) {
    const ir::Node* n = live[i];
    double s = all.error.empty() && ir::is_float(n->dtype) ? magnitude(all.outputs[i]) : 1;
    for (const ir::Node* in : n->inputs) s = std::max(s, scale.at(in));
    scale[n] = s;
  }
  std::vector<double> out;
  for (const ir::Node* n : outputs) out.push_back(scale.at(n));
  return out;
}

std::vector<std::string> compare_runs(const std::vector<FuzzValue>& outputs,
                                      const std::vector<double>& scales, const RunResult& got,
                                      const RunResult& want, const std::string& got_name) {
  std::vector<std::string> problems;
  if (!want.error.empty()) problems.push_back("reference failed: " + want.error);
  if (!got.error.empty()) problems.push_back(got_name + " failed: " + got.error);
  if (!problems.empty()) return problems;
  for (size_t o = 0; o < outputs.size(); ++o)
    compare_output(o, outputs[o], scales[o], got.outputs[o], want.outputs[o], got_name, problems);
  return problems;
}

}  // namespace kiln::testing::fuzz
