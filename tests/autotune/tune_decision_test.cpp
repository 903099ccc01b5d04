// TuneDecision: JSON round trip (as the cache stores it), malformed JSON, and describe().
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "autotune/tune_decision.h"

namespace kiln::autotune {
namespace {

codegen::TuneParams params(int vw, int unroll) {
  codegen::TuneParams p;
  p.vector_width = vw;
  p.unroll = unroll;
  return p;
}

TuneDecision sample_decision() {
  TuneDecision d;
  d.level = Level::extensive;
  d.roofline_ms = 0.125;
  d.stop_reason = "converged";
  d.runs_per_sample = 12;
  CandidateResult a;
  a.group = "default";
  a.samples = {1.5, 1.25, 1.75};
  a.score = 1.6;
  a.output_checked = true;
  a.compile_ms = 20;
  CandidateResult b;
  b.params = params(8, 2);
  b.params.stores = codegen::CpuStores::cached;
  b.group = "loop/vector_width=8";
  b.priority = 1;
  b.samples = {0.5, 0.75};
  b.score = 0.6;
  b.output_checked = true;
  CandidateResult c;
  c.params = params(16, 4);
  // Every GPU field travels too (no kernel takes all of them: this is the format only).
  c.params.block_size = 64;
  c.params.items_per_thread = 2;
  c.params.reduce = codegen::GpuReduce::thread;
  c.params.tile = 32;
  c.params.vector_loads = 4;
  c.params.splits = 16;
  c.group = "loop/vector_width=16";
  c.priority = 4;
  c.score = std::numeric_limits<double>::infinity();
  c.status = CandidateStatus::disqualified;
  c.reason = "wrong output: output %2 (out) element 5";
  d.candidates = {a, b, c};
  d.winner_index = 1;
  d.winner = b.params;
  return d;
}

TEST(TuneDecision, JsonRoundTrips) {
  const TuneDecision d = sample_decision();
  const nlohmann::json j = d.to_json();
  EXPECT_TRUE(j["candidates"][2]["score"].is_null());  // JSON has no infinity
  // Through text, as the cache stores it.
  Expected<TuneDecision> back = TuneDecision::from_json(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->winner, d.winner);
  EXPECT_EQ(back->winner_index, 1);
  EXPECT_EQ(back->level, Level::extensive);
  EXPECT_EQ(back->roofline_ms, 0.125);
  EXPECT_EQ(back->stop_reason, "converged");
  EXPECT_EQ(back->runs_per_sample, 12);
  ASSERT_EQ(back->candidates.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const CandidateResult &x = back->candidates[i], &y = d.candidates[i];
    EXPECT_EQ(x.params, y.params);
    EXPECT_EQ(x.group, y.group);
    EXPECT_EQ(x.priority, y.priority);
    EXPECT_EQ(x.samples, y.samples);
    EXPECT_EQ(x.status, y.status);
    EXPECT_EQ(x.reason, y.reason);
    EXPECT_EQ(x.output_checked, y.output_checked);
    EXPECT_EQ(x.compile_ms, y.compile_ms);
  }
  EXPECT_TRUE(std::isinf(back->candidates[2].score));
  EXPECT_EQ(back->to_json(), j);
}

TEST(TuneDecision, MalformedJsonIsAnError) {
  nlohmann::json j = sample_decision().to_json();
  j.erase("level");
  Expected<TuneDecision> missing = TuneDecision::from_json(j);
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message.find("autotune decision: malformed JSON"), std::string::npos)
      << missing.error().message;
  j = sample_decision().to_json();
  j["level"] = "turbo";
  EXPECT_EQ(TuneDecision::from_json(j).error().message, "autotune decision: unknown level 'turbo'");
  j = sample_decision().to_json();
  j["winner_index"] = 2;
  ASSERT_FALSE(TuneDecision::from_json(j).has_value());
  EXPECT_NE(TuneDecision::from_json(j).error().message.find("winner_index 2"), std::string::npos);
  j = sample_decision().to_json();
  j["candidates"][1]["params"]["stores"] = 3;
  ASSERT_FALSE(TuneDecision::from_json(j).has_value());
  EXPECT_NE(TuneDecision::from_json(j).error().message.find("unknown store kind 3"),
            std::string::npos)
      << TuneDecision::from_json(j).error().message;
  j = sample_decision().to_json();
  j["candidates"][0]["status"] = "great";
  EXPECT_NE(TuneDecision::from_json(j).error().message.find("unknown candidate status 'great'"),
            std::string::npos);
}

TEST(TuneDecision, DescribeListsEveryCandidate) {
  const std::string text = sample_decision().describe();
  EXPECT_NE(
      text.find(
          "autotune level extensive: winner #1 (vector_width=8 unroll=2 stores=cached), stopped: "
          "converged, roofline 0.125 ms, 12 run(s) per sample"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("vector_width=16 unroll=4"), std::string::npos) << text;
  EXPECT_NE(text.find("disqualified"), std::string::npos) << text;
  EXPECT_NE(text.find("wrong output: output %2 (out) element 5"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 5);  // title, header, 3 candidates
}

}  // namespace
}  // namespace kiln::autotune
