// Plan records: a Plan's wiring <-> CBOR (nlohmann::json), checked on the way back in.
#include "runtime/plan_record.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "runtime/plan_family.h"
#include "runtime/planner.h"

namespace kiln::runtime {

namespace {
using nlohmann::json;

json kernel_shape_json(const kir::Kernel& k) {
  json params = json::array();
  for (const kir::Param& p : k.params)
    params.push_back({{"dtype", std::string(ir::dtype_name(p.dtype))}, {"shape", p.shape},
                      {"output", p.output}, {"label", p.label}});
  json j = {
      {"name", k.name}, {"domain", k.domain}, {"params", params}, {"dynamic", k.dynamic_outer}};
  if (k.dynamic_bound != 0) j["bound"] = k.dynamic_bound;
  if (k.has_sizes()) {
    j["sizes"] = k.sizes;
    // Which slot each axis of the domain is: a launch's range follows its outer axis's slot
    // (CpuBackend::instance_range), where the code's own extent is another size's.
    if (!k.domain_slots.empty()) j["domain_slots"] = k.domain_slots;
  }
  return j;
}

// A shape a buffer can have: no negative dimension, and an element count that 64-bit byte offsets
// of any dtype can address.
bool valid_shape(const ir::Shape& shape) {
  return !ir::shape_size_problem(shape);
}

std::string shape_text(ir::DType dtype, const ir::Shape& shape) {
  return fmt::format("{}[{}]", ir::dtype_name(dtype), fmt::join(shape, ","));
}

// The part of a kernel the executor needs (names, params, domain): a run never reads the body.
Expected<kir::Kernel> kernel_shape_from_json(const json& j) {
  kir::Kernel k;
  k.name = j.at("name").get<std::string>();
  k.domain = j.at("domain").get<std::vector<int64_t>>();
  if (j.contains("dynamic")) k.dynamic_outer = j.at("dynamic").get<bool>();  // absent before dynamic kernels
  if (k.dynamic_outer && k.domain.empty())
    return make_error(fmt::format("kernel {}: dynamic with no outer axis", k.name));
  if (j.contains("bound")) {  // a size bucket's dynamic kernel
    k.dynamic_bound = j.at("bound").get<int64_t>();
    if (!k.dynamic_outer || k.dynamic_bound < 1 ||
        !std::has_single_bit(static_cast<uint64_t>(k.dynamic_bound)))
      return make_error(fmt::format("kernel {}: a size bucket of {}", k.name, k.dynamic_bound));
  }
  if (!valid_shape(k.domain))
    return make_error(fmt::format("kernel {}: domain [{}] is not a valid extent", k.name, fmt::join(k.domain, ",")));
  if (j.contains("sizes")) {  // a kernel with run-time sizes (ir/kernel_sizes.h): their values
    k.sizes = j.at("sizes").get<std::vector<int64_t>>();
    if (k.sizes.empty() || k.dynamic_outer)
      return make_error(fmt::format("kernel {}: {} run-time sizes{}", k.name, k.sizes.size(),
                                    k.dynamic_outer ? " in a dynamic kernel" : ""));
    if (j.contains("domain_slots")) {
      k.domain_slots = j.at("domain_slots").get<std::vector<int32_t>>();
      if (k.domain_slots.size() != k.domain.size())
        return make_error(fmt::format("kernel {}: domain slots for {} axes of {}", k.name,
                                      k.domain_slots.size(), k.domain.size()));
      for (size_t d = 0; d < k.domain.size(); ++d)
        if (const int32_t s = k.domain_slots[d];
            s < -1 || s >= static_cast<int32_t>(k.sizes.size()) ||
            (s >= 0 && k.sizes[static_cast<size_t>(s)] != k.domain[d]))
          return make_error(
              fmt::format("kernel {}: axis {} of its domain is no slot of its sizes", k.name, d));
    }
  } else if (j.contains("domain_slots")) {
    return make_error(fmt::format("kernel {}: domain slots without run-time sizes", k.name));
  }
  for (const json& p : j.at("params")) {
    const std::string dtype = p.at("dtype").get<std::string>();
    auto dt = ir::parse_dtype(dtype);
    if (!dt) return make_error(fmt::format("kernel {}: unknown dtype '{}'", k.name, dtype));
    k.params.push_back(kir::Param{*dt, p.at("shape").get<ir::Shape>(), p.at("output").get<bool>(),
                                  p.at("label").get<std::string>()});
    if (!valid_shape(k.params.back().shape))
      return make_error(fmt::format("kernel {}: parameter {} has an invalid shape", k.name,
                                    k.params.size() - 1));
  }
  k.arena = std::make_shared<kir::ExprArena>();
  return k;
}

bool in_range(int index, size_t size) { return index >= 0 && static_cast<size_t>(index) < size; }

}  // namespace

// Every index the executor follows stays inside the plan, and every buffer a kernel touches is
// the one its parameter describes: a step's arguments name slots, one per kernel parameter, of
// the parameter's dtype and shape; a kernel writes only temporaries, each once, and reads only
// inputs and temporaries written before and not yet released; releases free temporaries only;
// outputs are inputs or written; plan inputs are numbered once each.
Expected<void> check_plan_wiring(const Plan& plan) {
  const size_t n = plan.slots.size();
  std::unordered_set<int> inputs;
  for (size_t i = 0; i < n; ++i) {
    const Slot& s = plan.slots[i];
    if (!valid_shape(s.shape)) return make_error(fmt::format("slot {} has an invalid shape", i));
    if (s.input_index < -1) return make_error(fmt::format("slot {} has input index {}", i, s.input_index));
    if (s.input_index >= 0 && !inputs.insert(s.input_index).second)
      return make_error(fmt::format("two slots are bound to input {}", s.input_index));
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs.count(static_cast<int>(i)))
      return make_error(fmt::format("no slot is bound to input {} of {}", i, inputs.size()));
  std::vector<bool> is_output(n, false);
  for (int o : plan.output_slots) {
    if (!in_range(o, n)) return make_error(fmt::format("output slot {} of {} slots", o, n));
    is_output[o] = true;
  }
  enum class State { unwritten, live, released };
  std::vector<State> state(n, State::unwritten);
  for (size_t i = 0; i < n; ++i)
    if (plan.slots[i].input_index >= 0) state[i] = State::live;
  for (size_t st = 0; st < plan.steps.size(); ++st) {
    const PlanStep& step = plan.steps[st];
    const std::string where = fmt::format("step {} (kernel {})", st, step.kernel.name);
    if (step.kernel_digest.empty()) return make_error(where + ": no kernel digest");
    if (step.num_ops < 0) return make_error(where + ": a negative op count");
    if (step.args.size() != step.kernel.params.size())
      return make_error(fmt::format("{}: {} arguments for {} parameters", where, step.args.size(),
                                    step.kernel.params.size()));
    for (size_t p = 0; p < step.args.size(); ++p) {
      const int a = step.args[p];
      const kir::Param& param = step.kernel.params[p];
      if (!in_range(a, n)) return make_error(fmt::format("{}: argument {} names slot {} of {}", where, p, a, n));
      const Slot& slot = plan.slots[a];
      if (slot.dtype != param.dtype || slot.shape != param.shape)
        return make_error(fmt::format("{}: parameter {} is {} but its slot {} is {}", where, p,
                                      shape_text(param.dtype, param.shape), a,
                                      shape_text(slot.dtype, slot.shape)));
      if (!param.output && state[a] != State::live)
        return make_error(fmt::format("{}: parameter {} reads slot {}, which is {}", where, p, a,
                                      state[a] == State::released ? "released" : "not written yet"));
    }
    for (size_t p = 0; p < step.args.size(); ++p) {
      if (!step.kernel.params[p].output) continue;
      const int a = step.args[p];
      if (plan.slots[a].input_index >= 0)
        return make_error(fmt::format("{}: parameter {} writes slot {}, a plan input", where, p, a));
      if (state[a] != State::unwritten)
        return make_error(fmt::format("{}: parameter {} writes slot {} a second time", where, p, a));
      state[a] = State::live;
    }
    for (int r : step.release_after) {
      if (!in_range(r, n)) return make_error(fmt::format("{}: releases slot {} of {}", where, r, n));
      if (plan.slots[r].input_index >= 0 || is_output[r] || state[r] != State::live)
        return make_error(fmt::format("{}: releases slot {}, which is not a live temporary", where, r));
      state[r] = State::released;
    }
  }
  for (int o : plan.output_slots)
    if (state[o] != State::live) return make_error(fmt::format("output slot {} is never written", o));
  for (size_t st = 0; st < plan.steps.size(); ++st)
    for (const InPlace& ip : plan.steps[st].in_place)
      if (!in_place_fits(plan, st, ip))
        return make_error(fmt::format("step {} (kernel {}): parameter {} may not be written over slot {}",
                                      st, plan.steps[st].kernel.name, ip.param, ip.input_slot));
  return {};
}

namespace {

Expected<Plan> plan_from_json(const json& j) {
  if (j.contains("version") && j.at("version").get<int>() != kPlanRecordVersion)
    return make_error(fmt::format("a record of version {}, expected {}", j.at("version").dump(),
                                  kPlanRecordVersion));
  Plan plan;
  for (const json& s : j.at("slots")) {
    const std::string dtype = s.at("dtype").get<std::string>();
    auto dt = ir::parse_dtype(dtype);
    if (!dt) return make_error(fmt::format("slot {}: unknown dtype '{}'", plan.slots.size(), dtype));
    plan.slots.push_back(Slot{*dt, s.at("shape").get<ir::Shape>(), s.at("input").get<int>()});
  }
  for (const json& s : j.at("steps")) {
    auto kernel = kernel_shape_from_json(s.at("kernel"));
    if (!kernel) return std::unexpected(kernel.error());
    PlanStep step;
    step.kernel = std::move(*kernel);
    step.kernel_digest = s.at("digest").get<std::string>();
    step.args = s.at("args").get<std::vector<int>>();
    step.release_after = s.at("release_after").get<std::vector<int>>();
    step.values = s.at("values").get<std::vector<std::string>>();
    step.num_ops = s.at("num_ops").get<int>();
    if (s.contains("flops")) {  // absent in records written before kernel profiles
      step.flops = s.at("flops").get<double>();
      if (!(step.flops >= 0)) return make_error(fmt::format("step {}: flops {} is not a count", plan.steps.size(), step.flops));
    }
    if (s.contains("in_place"))  // absent in records written before buffer donation
      for (const json& ip : s.at("in_place"))
        step.in_place.push_back(InPlace{ip.at(0).get<int>(), ip.at(1).get<int>()});
    plan.steps.push_back(std::move(step));
  }
  plan.output_slots = j.at("outputs").get<std::vector<int>>();
  plan.fuser = j.at("fuser").get<std::string>();
  if (auto ok = check_plan_wiring(plan); !ok) return std::unexpected(ok.error());
  return plan;
}

std::optional<json> plan_to_json(const Plan& plan, const std::vector<std::string>& kernel_digests) {
  if (kernel_digests.size() != plan.steps.size()) return std::nullopt;
  json slots = json::array(), steps = json::array();
  for (const Slot& s : plan.slots)
    slots.push_back({{"dtype", std::string(ir::dtype_name(s.dtype))}, {"shape", s.shape},
                     {"input", s.input_index}});
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    if (kernel_digests[i].empty()) return std::nullopt;
    json in_place = json::array();
    for (const InPlace& ip : s.in_place) in_place.push_back({ip.param, ip.input_slot});
    steps.push_back({{"kernel", kernel_shape_json(s.kernel)}, {"digest", kernel_digests[i]},
                     {"args", s.args}, {"release_after", s.release_after}, {"values", s.values},
                     {"num_ops", s.num_ops}, {"in_place", std::move(in_place)}});
    if (s.flops >= 0) steps.back()["flops"] = s.flops;
  }
  return json{{"version", kPlanRecordVersion},
              {"slots", slots},
              {"steps", steps},
              {"outputs", plan.output_slots},
              {"fuser", plan.fuser}};
}

// Per step, the indices of its float slots.
json float_sizes_json(const PlanTemplate& t) {
  json out = json::array();
  for (size_t k = 0; k < t.base->steps.size(); ++k) {
    json slots = json::array();
    for (size_t s = 0; k < t.float_sizes.size() && s < t.float_sizes[k].size(); ++s)
      if (t.float_sizes[k][s]) slots.push_back(s);
    out.push_back(std::move(slots));
  }
  return out;
}

json affines_json(const std::vector<Affine>& fs) {
  json out = json::array();
  // A reciprocal (a float slot holding 1 / (a * t + c)) is a triple [a, c, 1].
  for (const Affine& f : fs) out.push_back(f.reciprocal ? json{f.a, f.c, 1} : json{f.a, f.c});
  return out;
}

Expected<std::vector<Affine>> affines_from_json(const json& j, const char* what) {
  std::vector<Affine> out;
  for (const json& f : j) {
    const auto ac = f.get<std::vector<int64_t>>();
    if (ac.size() != 2 && (ac.size() != 3 || ac[2] != 1))
      return make_error(
          fmt::format("{} {}: not a pair [a, c] or a reciprocal [a, c, 1]", what, out.size()));
    out.push_back(Affine{ac[0], ac[1], ac.size() == 3});
  }
  return out;
}

// A template's sizes against its base plan: one function per family size (t among them), one per
// size of the plan, one written-only flag per step parameter.
Expected<PlanTemplate> template_from_json(const json& j) {
  auto base = plan_from_json(j.at("plan"));
  if (!base) return std::unexpected(base.error());
  PlanTemplate t;
  t.variable = j.at("variable").get<size_t>();
  auto graph = affines_from_json(j.at("graph"), "family size");
  if (!graph) return std::unexpected(graph.error());
  auto sizes = affines_from_json(j.at("sizes"), "plan size");
  if (!sizes) return std::unexpected(sizes.error());
  t.graph = std::move(*graph);
  t.sizes = std::move(*sizes);
  if (t.variable >= t.graph.size() || t.graph[t.variable].a != 1 || t.graph[t.variable].c != 0)
    return make_error(fmt::format("family size {} of {} is not the template's variable", t.variable,
                                  t.graph.size()));
  if (t.sizes.size() != plan_size_count(*base))
    return make_error(fmt::format("{} size functions for a plan of {} sizes", t.sizes.size(),
                                  plan_size_count(*base)));
  if (std::ranges::any_of(t.graph, [](const Affine& f) { return f.reciprocal; }))
    return make_error("a family size is a reciprocal");
  t.written_only = j.at("written_only").get<std::vector<std::vector<bool>>>();
  if (t.written_only.size() != base->steps.size())
    return make_error(fmt::format("written-only flags for {} steps of {}", t.written_only.size(),
                                  base->steps.size()));
  for (size_t s = 0; s < base->steps.size(); ++s)
    if (t.written_only[s].size() != base->steps[s].kernel.params.size())
      return make_error(fmt::format("step {}: written-only flags for {} parameters of {}", s,
                                    t.written_only[s].size(), base->steps[s].kernel.params.size()));
  for (const json& r : j.at("relations")) {
    const auto v = r.get<std::vector<int64_t>>();
    if (v.size() != 3 || v[0] < 0 || static_cast<size_t>(v[0]) >= base->steps.size() || v[1] < 0 ||
        static_cast<size_t>(v[1]) >= base->steps[v[0]].kernel.params.size() ||
        (v[2] != 0 && v[2] != 1))
      return make_error(fmt::format("size relation {} names no step parameter", r.dump()));
    t.relations.push_back(
        SizeRelation{static_cast<uint32_t>(v[0]), static_cast<uint32_t>(v[1]), v[2] == 1});
  }
  // Per step, which run-time sizes are float slots (the kernels' bodies are not in the record):
  // the slots' indices, one list per step.
  for (size_t s = 0; s < base->steps.size(); ++s)
    t.float_sizes.emplace_back(base->steps[s].kernel.sizes.size(), false);
  if (j.contains("float_sizes")) {
    const auto lists = j.at("float_sizes").get<std::vector<std::vector<size_t>>>();
    if (lists.size() != base->steps.size())
      return make_error(
          fmt::format("float slots for {} steps of {}", lists.size(), base->steps.size()));
    for (size_t s = 0; s < lists.size(); ++s)
      for (const size_t slot : lists[s]) {
        if (slot >= t.float_sizes[s].size())
          return make_error(fmt::format("step {}: float slot {} of {} run-time sizes", s, slot,
                                        t.float_sizes[s].size()));
        t.float_sizes[s][slot] = true;
      }
  }
  t.base = std::make_shared<const Plan>(std::move(*base));
  if (!size_functions_fit(t))
    return make_error(
        "a size function does not suit its size (a reciprocal where the plan holds "
        "no float slot, or a float slot that changes as no reciprocal)");
  t.from_cache = true;
  return t;
}

template <typename Decode>
auto decode_cbor(std::span<const uint8_t> bytes, const char* what, Decode&& decode)
    -> decltype(decode(json{})) {
  // The parser throws on some damage even without exceptions (an array length past max_size).
  try {
    json j = json::from_cbor(bytes.begin(), bytes.end(), true, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return make_error(fmt::format("not a CBOR {}", what));
    return decode(j);
  } catch (const json::exception& e) {
    return make_error(fmt::format("a field is missing or of the wrong type ({})", e.what()));
  }
}
}  // namespace

std::optional<std::vector<uint8_t>> encode_plan_record(
    const Plan& plan, const std::vector<std::string>& kernel_digests) {
  std::optional<json> j = plan_to_json(plan, kernel_digests);
  if (!j) return std::nullopt;
  return json::to_cbor(*j);
}

Expected<Plan> decode_plan_record(std::span<const uint8_t> bytes) {
  return decode_cbor(bytes, "plan record", [](const json& j) { return plan_from_json(j); });
}

std::optional<std::vector<uint8_t>> encode_template_record(
    const std::vector<PlanTemplate>& templates) {
  json list = json::array();
  for (const PlanTemplate& t : templates) {
    if (!t.base) return std::nullopt;
    std::vector<std::string> digests;
    for (const PlanStep& step : t.base->steps) digests.push_back(step.kernel_digest);
    std::optional<json> plan = plan_to_json(*t.base, digests);
    if (!plan) return std::nullopt;
    json relations = json::array();
    for (const SizeRelation& r : t.relations)
      relations.push_back({r.step, r.param, r.numel ? 1 : 0});
    list.push_back({{"plan", std::move(*plan)},
                    {"variable", t.variable},
                    {"graph", affines_json(t.graph)},
                    {"sizes", affines_json(t.sizes)},
                    {"float_sizes", float_sizes_json(t)},
                    {"written_only", t.written_only},
                    {"relations", std::move(relations)}});
  }
  return json::to_cbor(json{{"version", kPlanRecordVersion}, {"templates", std::move(list)}});
}

Expected<std::vector<PlanTemplate>> decode_template_record(std::span<const uint8_t> bytes) {
  return decode_cbor(
      bytes, "template record", [](const json& j) -> Expected<std::vector<PlanTemplate>> {
        if (j.at("version").get<int>() != kPlanRecordVersion)
          return make_error(fmt::format("a record of version {}, expected {}",
                                        j.at("version").dump(), kPlanRecordVersion));
        std::vector<PlanTemplate> out;
        for (const json& t : j.at("templates")) {
          auto one = template_from_json(t);
          if (!one)
            return make_error(fmt::format("template {}: {}", out.size(), one.error().message));
          out.push_back(std::move(*one));
        }
        if (out.empty()) return make_error("no template");
        return out;
      });
}

std::optional<cache::Entry> plan_record_entry(const Plan& plan,
                                              const std::vector<std::string>& kernel_digests) {
  std::optional<std::vector<uint8_t>> record = encode_plan_record(plan, kernel_digests);
  if (!record) return std::nullopt;
  cache::Entry e;
  e.metadata = json{{"kernels", plan.steps.size()}}.dump();
  e.value = std::move(*record);
  return e;
}

Expected<void> check_plan_fits(const Plan& plan, const std::vector<const ir::Node*>& inputs,
                               const std::vector<const ir::Node*>& outputs) {
  size_t bound = 0;
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    const Slot& s = plan.slots[i];
    if (s.input_index < 0) continue;
    ++bound;
    if (static_cast<size_t>(s.input_index) >= inputs.size())
      return make_error(fmt::format("slot {} is bound to input {}, but the graph has {} inputs", i,
                                    s.input_index, inputs.size()));
    const ir::Node* in = inputs[s.input_index];
    if (s.dtype != in->dtype || s.shape != in->shape)
      return make_error(fmt::format("input {} is {} in the plan but {} in the graph", s.input_index,
                                    shape_text(s.dtype, s.shape), shape_text(in->dtype, in->shape)));
  }
  if (bound != inputs.size())
    return make_error(fmt::format("the plan binds {} inputs, the graph has {}", bound, inputs.size()));
  if (plan.output_slots.size() != outputs.size())
    return make_error(fmt::format("the plan has {} outputs, the graph asks for {}",
                                  plan.output_slots.size(), outputs.size()));
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Slot& s = plan.slots[plan.output_slots[o]];
    if (s.dtype != outputs[o]->dtype || s.shape != outputs[o]->shape)
      return make_error(fmt::format("output {} is {} in the plan but {} in the graph", o,
                                    shape_text(s.dtype, s.shape),
                                    shape_text(outputs[o]->dtype, outputs[o]->shape)));
  }
  return {};
}

Expected<Plan> plan_from_entry(const cache::Entry& entry) {
  return decode_plan_record(entry.value);
}

std::vector<std::string> distinct_kernel_digests(const Plan& plan) {
  std::vector<std::string> digests;
  std::unordered_set<std::string> seen;
  for (const PlanStep& step : plan.steps)
    if (seen.insert(step.kernel_digest).second) digests.push_back(step.kernel_digest);
  return digests;
}

}  // namespace kiln::runtime
