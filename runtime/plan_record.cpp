// Plan records: a Plan's wiring <-> CBOR (nlohmann::json), checked on the way back in.
#include "runtime/plan_record.h"

#include <nlohmann/json.hpp>
#include <unordered_set>

namespace kiln::runtime {

namespace {
using nlohmann::json;

// A record is checked against this before it is decoded: a flipped byte inside an index could
// still decode, and would wire a kernel to the wrong buffer.
std::string record_checksum(const std::vector<uint8_t>& record) {
  return cache::KeyParts{{{"record", std::string(record.begin(), record.end())}}}.digest();
}

json kernel_shape_json(const kir::Kernel& k) {
  json params = json::array();
  for (const kir::Param& p : k.params)
    params.push_back({{"dtype", std::string(ir::dtype_name(p.dtype))}, {"shape", p.shape},
                      {"output", p.output}, {"label", p.label}});
  return {{"name", k.name}, {"domain", k.domain}, {"params", params}};
}

bool valid_shape(const ir::Shape& shape) {
  for (int64_t d : shape)
    if (d < 0) return false;
  return true;
}

// The part of a kernel the executor needs (names, params, domain): a run never reads the body.
std::optional<kir::Kernel> kernel_shape_from_json(const json& j) {
  kir::Kernel k;
  k.name = j.at("name").get<std::string>();
  k.domain = j.at("domain").get<std::vector<int64_t>>();
  if (!valid_shape(k.domain)) return std::nullopt;
  for (const json& p : j.at("params")) {
    auto dt = ir::parse_dtype(p.at("dtype").get<std::string>());
    if (!dt) return std::nullopt;
    k.params.push_back(kir::Param{*dt, p.at("shape").get<ir::Shape>(), p.at("output").get<bool>(),
                                  p.at("label").get<std::string>()});
    if (!valid_shape(k.params.back().shape)) return std::nullopt;
  }
  k.arena = std::make_shared<kir::ExprArena>();
  return k;
}

bool in_range(int index, size_t size) { return index >= 0 && static_cast<size_t>(index) < size; }

// Every index the executor follows stays inside the plan: a step's arguments name slots, one per
// kernel param; releases and outputs name slots; plan inputs are numbered once each.
bool wiring_is_consistent(const Plan& plan) {
  std::unordered_set<int> inputs;
  for (const Slot& s : plan.slots) {
    if (!valid_shape(s.shape) || s.input_index < -1) return false;
    if (s.input_index >= 0 && !inputs.insert(s.input_index).second) return false;
  }
  for (const PlanStep& step : plan.steps) {
    if (step.kernel_digest.empty() || step.num_ops < 0 ||
        step.args.size() != step.kernel.params.size())
      return false;
    for (int a : step.args)
      if (!in_range(a, plan.slots.size())) return false;
    for (int r : step.release_after)
      if (!in_range(r, plan.slots.size())) return false;
  }
  for (int o : plan.output_slots)
    if (!in_range(o, plan.slots.size())) return false;
  return true;
}

std::optional<Plan> plan_from_json(const json& j) {
  if (j.contains("version") && j.at("version").get<int>() != kPlanRecordVersion) return std::nullopt;
  Plan plan;
  for (const json& s : j.at("slots")) {
    auto dt = ir::parse_dtype(s.at("dtype").get<std::string>());
    if (!dt) return std::nullopt;
    plan.slots.push_back(Slot{*dt, s.at("shape").get<ir::Shape>(), s.at("input").get<int>()});
  }
  for (const json& s : j.at("steps")) {
    auto kernel = kernel_shape_from_json(s.at("kernel"));
    if (!kernel) return std::nullopt;
    PlanStep step;
    step.kernel = std::move(*kernel);
    step.kernel_digest = s.at("digest").get<std::string>();
    step.args = s.at("args").get<std::vector<int>>();
    step.release_after = s.at("release_after").get<std::vector<int>>();
    step.values = s.at("values").get<std::vector<std::string>>();
    step.num_ops = s.at("num_ops").get<int>();
    plan.steps.push_back(std::move(step));
  }
  plan.output_slots = j.at("outputs").get<std::vector<int>>();
  plan.fuser = j.at("fuser").get<std::string>();
  if (!wiring_is_consistent(plan)) return std::nullopt;
  return plan;
}
}  // namespace

std::optional<std::vector<uint8_t>> encode_plan_record(const Plan& plan,
                                                       const std::vector<std::string>& kernel_digests) {
  if (kernel_digests.size() != plan.steps.size()) return std::nullopt;
  json slots = json::array(), steps = json::array();
  for (const Slot& s : plan.slots)
    slots.push_back({{"dtype", std::string(ir::dtype_name(s.dtype))}, {"shape", s.shape},
                     {"input", s.input_index}});
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    if (kernel_digests[i].empty()) return std::nullopt;
    steps.push_back({{"kernel", kernel_shape_json(s.kernel)}, {"digest", kernel_digests[i]},
                     {"args", s.args}, {"release_after", s.release_after}, {"values", s.values},
                     {"num_ops", s.num_ops}});
  }
  json j = {{"version", kPlanRecordVersion}, {"slots", slots}, {"steps", steps},
            {"outputs", plan.output_slots}, {"fuser", plan.fuser}};
  return json::to_cbor(j);
}

std::optional<Plan> decode_plan_record(std::span<const uint8_t> bytes) {
  // The parser throws on some damage even without exceptions (an array length past max_size).
  try {
    json j = json::from_cbor(bytes.begin(), bytes.end(), true, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    return plan_from_json(j);
  } catch (const json::exception&) {
    return std::nullopt;  // a damaged record or one of an incompatible writer: rebuild
  }
}

std::optional<cache::Entry> plan_record_entry(const Plan& plan,
                                              const std::vector<std::string>& kernel_digests) {
  std::optional<std::vector<uint8_t>> record = encode_plan_record(plan, kernel_digests);
  if (!record) return std::nullopt;
  cache::Entry e;
  e.metadata = json{{"kernels", plan.steps.size()}, {"checksum", record_checksum(*record)}}.dump();
  e.value = std::move(*record);
  return e;
}

std::optional<Plan> plan_from_entry(const cache::Entry& entry) {
  json meta = json::parse(entry.metadata, nullptr, /*allow_exceptions=*/false);
  if (meta.is_object() && meta.contains("checksum")) {
    const json& sum = meta["checksum"];
    if (!sum.is_string() || sum.get<std::string>() != record_checksum(entry.value))
      return std::nullopt;
  }
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
