// Plan records (runtime/plan_record.h): a plan's wiring survives encode -> decode; garbage,
// truncated, flipped, inconsistent and foreign records decode to nothing and never crash.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
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
  a.flops = 64;
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
  EXPECT_EQ(back->steps[0].flops, 64);  // the kernel's work survives without its body
  EXPECT_EQ(back->steps[1].flops, -1);  // unknown stays unknown
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
      Expected<Plan> plan = decode_plan_record(flipped);
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

// Wiring that stays inside the plan but hands a kernel the wrong buffer: each is refused with a
// reason (a stored plan is untrusted input; kiln cache verify reports the reason by key).
TEST(PlanRecord, WiringThatWouldMisuseABufferDoesNotDecode) {
  const auto reason = [](Plan plan) -> std::string {
    auto bytes = encode_plan_record(
        plan, std::vector<std::string>(kDigests.begin(), kDigests.begin() + plan.steps.size()));
    if (!bytes) return "not encoded";
    auto back = decode_plan_record(*bytes);
    return back ? "" : back.error().message;
  };
  EXPECT_EQ(reason(two_step_plan()), "");
  Plan p = two_step_plan();
  p.steps[0].args = {0, 0};  // the kernel would write its own input
  EXPECT_NE(reason(p).find("parameter 1 writes slot 0, a plan input"), std::string::npos) << reason(p);
  p = two_step_plan();
  p.slots[3].shape = {127};  // the output slot is not the buffer the kernel writes
  EXPECT_NE(reason(p).find("parameter 2 is f32[4] but its slot 3 is f32[127]"), std::string::npos)
      << reason(p);
  p = two_step_plan();
  p.steps[1].args = {1, 0, 3};  // i32[8] parameter bound to an f32[4,8] slot
  EXPECT_NE(reason(p).find("parameter 1 is i32[8] but its slot 0 is f32[4,8]"), std::string::npos)
      << reason(p);
  p = two_step_plan();
  std::swap(p.steps[0], p.steps[1]);  // k1 would read the temporary before k0 writes it
  EXPECT_NE(reason(p).find("reads slot 1, which is not written yet"), std::string::npos) << reason(p);
  p = two_step_plan();
  p.steps[0].release_after = {1};  // released before k1 reads it
  EXPECT_NE(reason(p).find("reads slot 1, which is released"), std::string::npos) << reason(p);
  p = two_step_plan();
  p.steps[1].release_after = {3};  // the output itself
  EXPECT_NE(reason(p).find("releases slot 3"), std::string::npos) << reason(p);
  p = two_step_plan();
  p.steps[1].kernel.params[2].shape = {4};
  p.steps[1].args[2] = 1;  // written twice... and of another shape
  EXPECT_FALSE(reason(p).empty());
  p = two_step_plan();
  p.steps.pop_back();  // nothing writes the output
  EXPECT_NE(reason(p).find("output slot 3 is never written"), std::string::npos) << reason(p);
  p = two_step_plan();
  p.slots[1].shape = {int64_t{1} << 40, int64_t{1} << 40};  // no 64-bit offset reaches it
  p.steps[0].kernel.params[1].shape = p.slots[1].shape;
  EXPECT_NE(reason(p).find("invalid shape"), std::string::npos) << reason(p);
}

// A plan that decodes is still checked against the graph that asked for it.
TEST(PlanRecord, APlanMustFitTheGraphThatAsksForIt) {
  ir::Graph g;
  const ir::Node* x = g.input(DType::f32, {4, 8}, "x");
  const ir::Node* i = g.input(DType::i32, {8}, "i");
  const ir::Node* y = g.input(DType::f32, {4}, "y");  // stands for an output of that dtype and shape
  const Plan plan = two_step_plan();
  EXPECT_TRUE(check_plan_fits(plan, {x, i}, {y}).has_value());
  const ir::Node* wide = g.input(DType::f32, {127}, "w");
  auto out = check_plan_fits(plan, {x, i}, {wide});
  ASSERT_FALSE(out.has_value());
  EXPECT_NE(out.error().message.find("output 0 is f32[4] in the plan but f32[127] in the graph"),
            std::string::npos)
      << out.error().message;
  auto in = check_plan_fits(plan, {i, x}, {y});
  ASSERT_FALSE(in.has_value());
  EXPECT_NE(in.error().message.find("input 0 is f32[4,8] in the plan but i32[8] in the graph"),
            std::string::npos)
      << in.error().message;
  EXPECT_FALSE(check_plan_fits(plan, {x}, {y}).has_value());
  EXPECT_FALSE(check_plan_fits(plan, {x, i}, {y, y}).has_value());
}

}  // namespace
}  // namespace kiln::runtime
