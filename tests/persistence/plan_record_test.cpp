// Plan records (runtime/plan_record.h): a plan's wiring survives encode -> decode; garbage,
// truncated, flipped, inconsistent and foreign records decode to nothing and never crash.
#include <gtest/gtest.h>

#include <bit>
#include <functional>
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

// The symbolic plan of two_step_plan in its batch size b (the 4s), the first of its family's
// sizes (b, 8, 8): every size of the plan that is 4 follows b; k0 is dynamic, of the bucket 16.
PlanTemplate two_step_template() {
  Plan base = two_step_plan();
  base.steps[0].kernel.dynamic_outer = true;
  base.steps[0].kernel.dynamic_bound = 16;
  for (size_t i = 0; i < base.steps.size(); ++i) base.steps[i].kernel_digest = kDigests[i];
  PlanTemplate t;
  t.graph = {{1, 0}, {0, 8}, {0, 8}};
  for (const int64_t d : {4, 8, 4, 8, 8, 4, /*k0*/ 4, 8, 4, 8, 4, 8, /*k1*/ 4, 4, 8, 8, 4})
    t.sizes.push_back(d == 4 ? Affine{1, 0} : Affine{0, d});
  t.written_only = {{false, true}, {false, false, true}};
  t.relations = {{0, 0, true}, {0, 1, false}};
  t.base = std::make_shared<const Plan>(std::move(base));
  return t;
}

TEST(PlanRecord, SymbolicPlansSurviveARoundTripAndServeANewSize) {
  const PlanTemplate t = two_step_template();
  ASSERT_EQ(t.sizes.size(), plan_size_count(*t.base));
  auto bytes = encode_template_record({t, t});
  ASSERT_TRUE(bytes.has_value());
  auto back = decode_template_record(*bytes);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  ASSERT_EQ(back->size(), 2u);
  const PlanTemplate& b = back->front();
  EXPECT_TRUE(b.from_cache);
  EXPECT_EQ(b.variable, 0u);
  EXPECT_EQ(b.written_only, t.written_only);
  ASSERT_EQ(b.relations.size(), 2u);
  EXPECT_TRUE(b.relations[0].numel && !b.relations[1].numel && b.relations[1].param == 1);
  ASSERT_EQ(b.sizes.size(), t.sizes.size());
  for (size_t i = 0; i < t.sizes.size(); ++i)
    EXPECT_TRUE(b.sizes[i].a == t.sizes[i].a && b.sizes[i].c == t.sizes[i].c) << i;
  EXPECT_TRUE(b.base->steps[0].kernel.dynamic_outer);
  EXPECT_EQ(b.base->steps[0].kernel.dynamic_bound, 16);
  EXPECT_EQ(b.base->steps[1].kernel_digest, "bbbb");
  std::optional<Plan> at9 = instantiate_plan(b, {9, 8, 8});
  ASSERT_TRUE(at9.has_value());
  EXPECT_EQ(at9->slots[0].shape, (ir::Shape{9, 8}));
  EXPECT_EQ(at9->slots[3].shape, (ir::Shape{9}));
  EXPECT_EQ(at9->steps[0].kernel.domain, (std::vector<int64_t>{9, 8}));
  EXPECT_EQ(at9->steps[1].kernel.params[0].shape, (ir::Shape{9, 8}));
  EXPECT_TRUE(check_plan_wiring(*at9).has_value());
  // Not the template's functions (8 is fixed), sizes 0 and 1, a size past 64-bit arithmetic.
  EXPECT_FALSE(instantiate_plan(b, {9, 7, 8}).has_value());
  EXPECT_FALSE(instantiate_plan(b, {1, 8, 8}).has_value());
  EXPECT_FALSE(instantiate_plan(b, {0, 8, 8}).has_value());
  PlanTemplate huge = b;
  huge.sizes[1] = Affine{int64_t{1} << 62, 0};
  EXPECT_FALSE(instantiate_plan(huge, {9, 8, 8}).has_value());
  // k0's domain no longer its parameters' rows (its point count no longer theirs): no instance.
  PlanTemplate apart = b;
  apart.sizes[6] = Affine{2, 0};
  EXPECT_FALSE(instantiate_plan(apart, {9, 8, 8}).has_value());
  apart.relations.clear();
  EXPECT_TRUE(instantiate_plan(apart, {9, 8, 8}).has_value());
}

// A template record that does not match its plan is refused with the reason, never instantiated.
TEST(PlanRecord, ATemplateThatDoesNotMatchItsPlanDoesNotDecode) {
  using nlohmann::json;
  const auto reason = [](const std::function<void(json&)>& damage) -> std::string {
    json j = json::from_cbor(*encode_template_record({two_step_template()}));
    damage(j);
    auto back = decode_template_record(json::to_cbor(j));
    return back ? "" : back.error().message;
  };
  EXPECT_EQ(reason([](json&) {}), "");
  EXPECT_NE(reason([](json& j) {
              j["templates"][0]["sizes"].erase(3);
            }).find("16 size functions for a plan of 17 sizes"),
            std::string::npos);
  EXPECT_NE(reason([](json& j) { j["templates"][0]["variable"] = 3; }).find("family size 3 of 3"),
            std::string::npos);
  EXPECT_NE(reason([](json& j) {
              j["templates"][0]["variable"] = 1;
            }).find("not the template's variable"),
            std::string::npos);
  EXPECT_NE(reason([](json& j) {
              j["templates"][0]["written_only"][1].erase(0);
            }).find("step 1: written-only flags for 2 parameters of 3"),
            std::string::npos);
  EXPECT_NE(
      reason([](json& j) { j["templates"][0]["written_only"].erase(0); }).find("for 1 steps of 2"),
      std::string::npos);
  EXPECT_NE(reason([](json& j) { j["templates"][0]["graph"][1] = {1}; }).find("not a pair"),
            std::string::npos);
  EXPECT_NE(reason([](json& j) {
              j["templates"][0]["plan"]["steps"][0]["kernel"]["bound"] = 12;
            }).find("a size bucket of 12"),
            std::string::npos);
  EXPECT_NE(reason([](json& j) {
              j["templates"][0]["plan"]["steps"][1]["args"] = {1, 2};
            }).find("template 0: step 1"),
            std::string::npos);
  EXPECT_NE(
      reason([](json& j) { j["version"] = kPlanRecordVersion + 1; }).find("a record of version"),
      std::string::npos);
  EXPECT_NE(reason([](json& j) {
              j["templates"][0]["relations"][1] = {0, 2, 0};
            }).find("names no step parameter"),
            std::string::npos);
  EXPECT_NE(reason([](json& j) {
              j["templates"][0]["relations"][0] = {2, 0, 1};
            }).find("names no step parameter"),
            std::string::npos);
  EXPECT_EQ(reason([](json& j) { j["templates"] = json::array(); }), "no template");
  EXPECT_NE(reason([](json& j) { j.erase("templates"); }).find("missing or of the wrong type"),
            std::string::npos);
  EXPECT_FALSE(decode_template_record(std::vector<uint8_t>(64, 0xff)).has_value());
}

// A mean's scale in a kernel of run-time sizes: k1 reads 1/b as a float slot, whose function is
// a reciprocal ([1, 0, 1]). The record says which slots are floats; a reciprocal anywhere else
// (a buffer's size, an integer slot) does not decode, and an instance computes 1.0 / b.
TEST(PlanRecord, AFloatSlotsReciprocalSurvivesARoundTripAndOnlyThere) {
  using nlohmann::json;
  PlanTemplate t = two_step_template();
  Plan base = *t.base;
  base.steps[1].kernel.sizes = {std::bit_cast<int64_t>(1.0 / 4.0)};
  t.base = std::make_shared<const Plan>(std::move(base));
  t.sizes.push_back(Affine{1, 0, true});
  ASSERT_EQ(t.sizes.size(), plan_size_count(*t.base));
  const auto decode = [&](const std::function<void(json&)>& edit) {
    json j = json::from_cbor(*encode_template_record({t}));
    edit(j);
    return decode_template_record(json::to_cbor(j));
  };
  const auto floats = [](json& j) {
    j["templates"][0]["float_sizes"] = json::array({json::array(), json::array({0})});
  };
  // The template does not say slot 0 is a float (its kernel has no body here to say it): refused.
  auto no_floats = decode([](json&) {});
  ASSERT_FALSE(no_floats.has_value());
  EXPECT_NE(no_floats.error().message.find("does not suit its size"), std::string::npos);
  auto back = decode(floats);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_TRUE(back->front().sizes.back().reciprocal);
  EXPECT_EQ(back->front().float_sizes, (std::vector<std::vector<bool>>{{}, {true}}));
  // A template read back and stored again keeps its float slots.
  auto again = decode_template_record(*encode_template_record({back->front(), back->front()}));
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(again->back().float_sizes, back->front().float_sizes);
  std::optional<Plan> at9 = instantiate_plan(back->front(), {9, 8, 8});
  ASSERT_TRUE(at9.has_value());
  EXPECT_EQ(std::bit_cast<double>(at9->steps[1].kernel.sizes[0]), 1.0 / 9.0);
  EXPECT_EQ(at9->steps[1].kernel.domain, (std::vector<int64_t>{9}));
  // A reciprocal standing for a buffer's size; a float slot past the kernel's sizes.
  auto on_a_shape = decode([&](json& j) {
    floats(j);
    j["templates"][0]["sizes"][0] = {1, 0, 1};
  });
  ASSERT_FALSE(on_a_shape.has_value());
  EXPECT_NE(on_a_shape.error().message.find("does not suit its size"), std::string::npos);
  auto past = decode([](json& j) {
    j["templates"][0]["float_sizes"] = json::array({json::array(), json::array({3})});
  });
  ASSERT_FALSE(past.has_value());
  EXPECT_NE(past.error().message.find("step 1: float slot 3 of 1 run-time sizes"),
            std::string::npos);
  auto one_step = decode([](json& j) { j["templates"][0]["float_sizes"] = {json::array({0})}; });
  ASSERT_FALSE(one_step.has_value());
  EXPECT_NE(one_step.error().message.find("float slots for 1 steps of 2"), std::string::npos)
      << one_step.error().message;
  auto bad_triple = decode([&](json& j) {
    floats(j);
    j["templates"][0]["sizes"].back() = {1, 0, 2};
  });
  ASSERT_FALSE(bad_triple.has_value());
  EXPECT_NE(bad_triple.error().message.find("not a pair [a, c] or a reciprocal"),
            std::string::npos);
  // Which slot each axis of the domain is: one per axis, each a slot holding that extent.
  const auto slots = [&](json axes) {
    return decode([&](json& j) {
      floats(j);
      j["templates"][0]["plan"]["steps"][1]["kernel"]["domain_slots"] = axes;
    });
  };
  EXPECT_TRUE(slots({-1}).has_value());
  for (const auto& [axes, why] :
       std::vector<std::pair<json, std::string>>{{{-1, -1}, "domain slots for 2 axes of 1"},
                                                 {{0}, "axis 0 of its domain is no slot"},
                                                 {{1}, "axis 0 of its domain is no slot"}}) {
    auto back = slots(axes);
    ASSERT_FALSE(back.has_value()) << axes.dump();
    EXPECT_NE(back.error().message.find(why), std::string::npos) << back.error().message;
  }
}

}  // namespace
}  // namespace kiln::runtime
