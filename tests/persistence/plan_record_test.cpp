// Plan records (runtime/plan_record.h): a plan's wiring survives encode -> decode; garbage,
// truncated, flipped, inconsistent and foreign records decode to nothing and never crash.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "runtime/plan_record.h"

namespace kiln::runtime {
namespace {

using ir::DType;

kir::Param param(DType dtype, ir::Shape shape, bool output, std::string label) {
  return kir::Param{dtype, std::move(shape), output, std::move(label)};
}

// Two steps over four slots: k0 reads input 0 into a temporary, k1 reads it and input 1.
Plan two_step_plan() {
  Plan plan;
  plan.slots = {Slot{DType::f32, {4, 8}, 0}, Slot{DType::f32, {4, 8}, -1},
                Slot{DType::i32, {8}, 1}, Slot{DType::f32, {4}, -1}};
  PlanStep a;
  a.kernel.name = "k0";
  a.kernel.domain = {4, 8};
  a.kernel.params = {param(DType::f32, {4, 8}, false, "x"), param(DType::f32, {4, 8}, true, "%t3")};
  a.args = {0, 1};
  a.values = {"%t3"};
  a.num_ops = 2;
  PlanStep b;
  b.kernel.name = "k1";
  b.kernel.domain = {4};
  b.kernel.params = {param(DType::f32, {4, 8}, false, "%t3"), param(DType::i32, {8}, false, "i"),
                     param(DType::f32, {4}, true, "y")};
  b.args = {1, 2, 3};
  b.release_after = {1};
  b.values = {"y"};
  b.num_ops = 3;
  plan.steps = {a, b};
  plan.output_slots = {3};
  plan.fuser = "beam max_blocks=4";
  return plan;
}

const std::vector<std::string> kDigests = {"aaaa", "bbbb"};

TEST(PlanRecord, TheWiringSurvivesARoundTrip) {
  const Plan plan = two_step_plan();
  auto bytes = encode_plan_record(plan, kDigests);
  ASSERT_TRUE(bytes.has_value());
  auto back = decode_plan_record(*bytes);
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->slots.size(), plan.slots.size());
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    EXPECT_EQ(back->slots[i].dtype, plan.slots[i].dtype);
    EXPECT_EQ(back->slots[i].shape, plan.slots[i].shape);
    EXPECT_EQ(back->slots[i].input_index, plan.slots[i].input_index);
  }
  ASSERT_EQ(back->steps.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const PlanStep& s = back->steps[i];
    const PlanStep& want = plan.steps[i];
    EXPECT_EQ(s.kernel_digest, kDigests[i]);
    EXPECT_EQ(s.kernel.name, want.kernel.name);
    EXPECT_EQ(s.kernel.domain, want.kernel.domain);
    ASSERT_EQ(s.kernel.params.size(), want.kernel.params.size());
    for (size_t p = 0; p < s.kernel.params.size(); ++p) {
      EXPECT_EQ(s.kernel.params[p].dtype, want.kernel.params[p].dtype);
      EXPECT_EQ(s.kernel.params[p].shape, want.kernel.params[p].shape);
      EXPECT_EQ(s.kernel.params[p].output, want.kernel.params[p].output);
      EXPECT_EQ(s.kernel.params[p].label, want.kernel.params[p].label);
    }
    EXPECT_TRUE(s.kernel.stores.empty());  // the shape only, never the body
    EXPECT_EQ(s.artifact, nullptr);
    EXPECT_EQ(s.args, want.args);
    EXPECT_EQ(s.release_after, want.release_after);
    EXPECT_EQ(s.values, want.values);
    EXPECT_EQ(s.num_ops, want.num_ops);
  }
  EXPECT_EQ(back->output_slots, plan.output_slots);
  EXPECT_EQ(back->fuser, plan.fuser);
  EXPECT_EQ(back->loaded, 0);
  EXPECT_EQ(back->compiled, 0);
  EXPECT_EQ(distinct_kernel_digests(*back), kDigests);
  EXPECT_EQ(*encode_plan_record(*back, kDigests), *bytes);  // deterministic
}

TEST(PlanRecord, EveryStepNeedsADigest) {
  EXPECT_FALSE(encode_plan_record(two_step_plan(), {"aaaa"}).has_value());
  EXPECT_FALSE(encode_plan_record(two_step_plan(), {"aaaa", ""}).has_value());
  EXPECT_FALSE(plan_record_entry(two_step_plan(), {}).has_value());
}

TEST(PlanRecord, GarbageTruncatedAndFlippedRecordsNeverCrash) {
  EXPECT_FALSE(decode_plan_record(std::vector<uint8_t>{}).has_value());
  EXPECT_FALSE(decode_plan_record(std::vector<uint8_t>(64, 0xff)).has_value());
  // An array and a map whose lengths pass any allocation (the parser throws on those).
  for (uint8_t head : {0x9b, 0xbb})
    EXPECT_FALSE(decode_plan_record(std::vector<uint8_t>{head, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff,
                                                         0xff, 0xff})
                     .has_value());
  const std::string text = "not a plan record at all";
  EXPECT_FALSE(decode_plan_record(std::vector<uint8_t>(text.begin(), text.end())).has_value());
  const std::vector<uint8_t> bytes = *encode_plan_record(two_step_plan(), kDigests);
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(decode_plan_record(std::span(bytes.data(), n)).has_value()) << n;
  // A flipped byte may still decode (a label, a dimension); what decodes is consistent.
  for (size_t i = 0; i < bytes.size(); ++i)
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> flipped = bytes;
      flipped[i] ^= mask;
      std::optional<Plan> plan = decode_plan_record(flipped);
      for (const PlanStep& s : plan ? plan->steps : std::vector<PlanStep>{})
        EXPECT_EQ(s.args.size(), s.kernel.params.size());
    }
}

TEST(PlanRecord, InconsistentWiringDoesNotDecode) {
  const auto rejects = [](Plan plan) {
    auto bytes = encode_plan_record(plan, kDigests);
    return bytes && !decode_plan_record(*bytes).has_value();
  };
  Plan p = two_step_plan();
  p.steps[1].args[2] = 4;  // no slot 4
  EXPECT_TRUE(rejects(p));
  p = two_step_plan();
  p.steps[0].args.pop_back();  // fewer arguments than params
  EXPECT_TRUE(rejects(p));
  p = two_step_plan();
  p.steps[1].release_after = {-1};
  EXPECT_TRUE(rejects(p));
  p = two_step_plan();
  p.output_slots = {7};
  EXPECT_TRUE(rejects(p));
  p = two_step_plan();
  p.slots[2].input_index = 0;  // two slots bound to input 0
  EXPECT_TRUE(rejects(p));
  p = two_step_plan();
  p.slots[1].shape = {4, -8};
  EXPECT_TRUE(rejects(p));
}

TEST(PlanRecord, ARecordOfAnotherVersionDoesNotDecode) {
  using nlohmann::json;
  json j = json::from_cbor(*encode_plan_record(two_step_plan(), kDigests));
  ASSERT_EQ(j.at("version").get<int>(), kPlanRecordVersion);
  j["version"] = kPlanRecordVersion + 1;
  EXPECT_FALSE(decode_plan_record(json::to_cbor(j)).has_value());
  j.erase("version");  // records written before the field are version 1
  EXPECT_TRUE(decode_plan_record(json::to_cbor(j)).has_value());
  j["slots"] = "three";
  EXPECT_FALSE(decode_plan_record(json::to_cbor(j)).has_value());
}

TEST(PlanRecord, AnEntryIsCheckedAgainstItsChecksum) {
  std::optional<cache::Entry> e = plan_record_entry(two_step_plan(), kDigests);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->metadata.find("\"checksum\""), std::string::npos) << e->metadata;
  EXPECT_TRUE(plan_from_entry(*e).has_value());
  // A change the decoder cannot see (a label) is caught by the checksum.
  cache::Entry damaged = *e;
  const std::string label = "%t3";
  auto at = std::search(damaged.value.begin(), damaged.value.end(), label.begin(), label.end());
  ASSERT_NE(at, damaged.value.end());
  at[1] = 'u';
  EXPECT_TRUE(decode_plan_record(damaged.value).has_value());
  EXPECT_FALSE(plan_from_entry(damaged).has_value());
  // Entries of writers before the checksum are decoded as they are.
  cache::Entry older = damaged;
  older.metadata = R"({"kernels":2})";
  EXPECT_TRUE(plan_from_entry(older).has_value());
  older.metadata = "not json";
  EXPECT_TRUE(plan_from_entry(older).has_value());
}

}  // namespace
}  // namespace kiln::runtime
