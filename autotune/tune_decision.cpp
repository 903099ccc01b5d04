// TuneDecision to and from JSON, and its table for people.
#include "autotune/tune_decision.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "autotune/scorer.h"

namespace kiln::autotune {

namespace {

using nlohmann::json;

// The GPU fields and the cpu's store kind are written only when set, so decisions read as before.
json params_json(const codegen::TuneParams& p) {
  json j{{"vector_width", p.vector_width}, {"unroll", p.unroll}};
  if (p.stores != codegen::CpuStores::heuristic) j["stores"] = static_cast<int>(p.stores);
  if (p.block_size != 0) j["block_size"] = p.block_size;
  if (p.items_per_thread != 0) j["items_per_thread"] = p.items_per_thread;
  if (p.reduce != codegen::GpuReduce::heuristic) j["reduce"] = static_cast<int>(p.reduce);
  if (p.tile != 0) j["tile"] = p.tile;
  if (p.vector_loads != 0) j["vector_loads"] = p.vector_loads;
  if (p.splits != 0) j["splits"] = p.splits;
  return j;
}

codegen::TuneParams params_from(const json& j) {
  codegen::TuneParams p;
  p.vector_width = j.at("vector_width").get<int>();
  p.unroll = j.at("unroll").get<int>();
  const int stores = j.value("stores", 0);
  if (stores < 0 || stores > static_cast<int>(codegen::CpuStores::streaming))
    throw std::invalid_argument(fmt::format("unknown store kind {}", stores));
  p.stores = static_cast<codegen::CpuStores>(stores);
  p.block_size = j.value("block_size", 0);
  p.items_per_thread = j.value("items_per_thread", 0);
  const int reduce = j.value("reduce", 0);
  if (reduce < 0 || reduce > static_cast<int>(codegen::GpuReduce::thread))
    throw std::invalid_argument(fmt::format("unknown reduce strategy {}", reduce));
  p.reduce = static_cast<codegen::GpuReduce>(reduce);
  p.tile = j.value("tile", 0);
  p.vector_loads = j.value("vector_loads", 0);
  p.splits = j.value("splits", 0);
  // A stored decision is untrusted input: every field within what the code generators take.
  const auto pow2_in = [](int v, int lo, int hi) { return v == 0 || (v >= lo && v <= hi && (v & (v - 1)) == 0); };
  if (!pow2_in(p.vector_width, 1, 64) || p.unroll < 0 || p.unroll > 16 ||
      !pow2_in(p.block_size, 32, 1024) || !pow2_in(p.items_per_thread, 1, 8) ||
      !pow2_in(p.tile, 16, 128) || (p.vector_loads != 0 && p.vector_loads != 1 && p.vector_loads != 4) ||
      !pow2_in(p.splits, 1, 256))
    throw std::invalid_argument(fmt::format("tune parameters out of range: {}", p.str()));
  return p;
}

// JSON has no infinity: a score without samples is null.
json number_or_null(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

CandidateStatus status_from(const std::string& s) {
  for (CandidateStatus c :
       {CandidateStatus::ok, CandidateStatus::dropped, CandidateStatus::disqualified})
    if (status_name(c) == s) return c;
  throw std::invalid_argument(fmt::format("unknown candidate status '{}'", s));
}

CandidateResult candidate_from(const json& j) {
  CandidateResult c;
  c.params = params_from(j.at("params"));
  c.group = j.at("group").get<std::string>();
  c.priority = j.at("priority").get<int>();
  c.samples = j.at("samples").get<std::vector<double>>();
  c.score = j.at("score").is_null() ? std::numeric_limits<double>::infinity()
                                    : j.at("score").get<double>();
  c.status = status_from(j.at("status").get<std::string>());
  c.reason = j.at("reason").get<std::string>();
  c.output_checked = j.at("output_checked").get<bool>();
  c.compile_ms = j.at("compile_ms").get<double>();
  return c;
}

std::string ms_text(double v) {
  return std::isfinite(v) ? fmt::format("{:.4g}", v) : "-";
}

}  // namespace

json TuneDecision::to_json() const {
  json cands = json::array();
  for (const CandidateResult& c : candidates)
    cands.push_back({{"params", params_json(c.params)},
                     {"group", c.group},
                     {"priority", c.priority},
                     {"samples", c.samples},
                     {"score", number_or_null(c.score)},
                     {"status", status_name(c.status)},
                     {"reason", c.reason},
                     {"output_checked", c.output_checked},
                     {"compile_ms", c.compile_ms}});
  return {{"winner", params_json(winner)}, {"winner_index", winner_index},
          {"level", level_name(level)},    {"roofline_ms", roofline_ms},
          {"stop_reason", stop_reason},    {"runs_per_sample", runs_per_sample},
          {"candidates", std::move(cands)}};
}

Expected<TuneDecision> TuneDecision::from_json(const json& j) {
  try {
    TuneDecision d;
    d.winner = params_from(j.at("winner"));
    d.winner_index = j.at("winner_index").get<int>();
    const std::string level = j.at("level").get<std::string>();
    const std::optional<Level> l = parse_level(level);
    if (!l) return make_error(fmt::format("autotune decision: unknown level '{}'", level));
    d.level = *l;
    d.roofline_ms = j.at("roofline_ms").get<double>();
    d.stop_reason = j.at("stop_reason").get<std::string>();
    d.runs_per_sample = j.at("runs_per_sample").get<int>();
    for (const json& c : j.at("candidates")) d.candidates.push_back(candidate_from(c));
    if (d.winner_index < 0 || d.winner_index >= static_cast<int>(d.candidates.size()) ||
        d.candidates[static_cast<size_t>(d.winner_index)].params != d.winner)
      return make_error(
          fmt::format("autotune decision: winner_index {} does not name the winner "
                      "({}) among {} candidates",
                      d.winner_index, d.winner.str(), d.candidates.size()));
    return d;
  } catch (const std::exception& e) {
    return make_error(fmt::format("autotune decision: malformed JSON: {}", e.what()));
  }
}

std::string TuneDecision::describe() const {
  std::string out = fmt::format(
      "autotune level {}: winner #{} ({}), stopped: {}, roofline {} ms, {} run(s) per sample\n",
      level_name(level), winner_index, winner.str(), stop_reason,
      roofline_ms > 0 ? ms_text(roofline_ms) : "-", runs_per_sample);
  size_t width = 28;  // the params column fits the longest
  for (const CandidateResult& c : candidates) width = std::max(width, c.params.str().size());
  out += fmt::format("  {:>3} {:<{}} {:<13} {:>7} {:>10} {:>10} {:>10}  {}\n", "#", "params", width,
                     "status", "samples", "min ms", "median ms", "score", "reason");
  for (size_t i = 0; i < candidates.size(); ++i) {
    const CandidateResult& c = candidates[i];
    out += fmt::format("  {:>3} {:<{}} {:<13} {:>7} {:>10} {:>10} {:>10}  {}\n", i, c.params.str(), width,
                       status_name(c.status), c.samples.size(), ms_text(min_of(c.samples)),
                       ms_text(median_of(c.samples)), ms_text(c.score), c.reason);
  }
  return out;
}

}  // namespace kiln::autotune
