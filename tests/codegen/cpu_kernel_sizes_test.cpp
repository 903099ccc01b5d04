// Kernels with run-time sizes (ir/kernel_sizes.h) on the cpu backend: the kernels of one graph
// lowered at two sizes of an inner axis make one general kernel; compiled once, it computes the
// kernel of every other size that matches it as the kernel compiled for that size does.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>

#include <fmt/format.h>
#include <random>
#include <string>
#include <vector>

#include "codegen/cpu/llvm_emitter.h"
#include "ir/builder.h"
#include "ir/kernel_facts.h"
#include "ir/kernel_sizes.h"
#include "ir/verify.h"
#include "passes/cost_model.h"
#include "passes/fuser.h"
#include "passes/pipeline.h"
#include "tests/codegen/cpu_test_support.h"

namespace kiln::codegen::testing {
namespace {

using ir::Node;

struct Case {
  std::string name;
  std::function<const Node*(ir::Builder&, const Node*)> build;  // of x : f32[3, n]
  int64_t min_size = 0;  // the smallest n the graph takes (an arg reduction needs 1)
  bool beam = false;     // fused by the beam search (softmax in one kernel, keeping a row)
};

std::vector<Case> cases() {
  auto must = [](ir::NodeResult r) {
    KILN_CHECK(r.has_value()) << r.error().message;
    return *r;
  };
  return {
      {"softmax", [=](ir::Builder& b, const Node* x) { return must(b.softmax(x, 1)); }},
      {"sum",
       [=](ir::Builder& b, const Node* x) {
         return must(b.reduce(ir::Op::Sum, x, std::vector<int64_t>{1}, false));
       }},
      {"max_minus_x",
       [=](ir::Builder& b, const Node* x) {
         const Node* m = must(b.reduce(ir::Op::ReduceMax, x, std::vector<int64_t>{1}, true));
         return must(b.binary(ir::Op::Sub, m, x));
       },
       1},
      {"argmax",
       [=](ir::Builder& b, const Node* x) {
         return must(b.arg_reduce(ir::Op::ArgMax, x, 1, false));
       },
       1},
      {"cumsum", [=](ir::Builder& b, const Node* x) { return must(b.cumsum(x, 1, false, false)); }},
      {"reversed_cumsum",
       [=](ir::Builder& b, const Node* x) { return must(b.cumsum(x, 1, true, true)); }},
      {"fused_softmax", [=](ir::Builder& b, const Node* x) { return must(b.softmax(x, 1)); }, 0,
       true},
      {"fused_layernorm",
       [=](ir::Builder& b, const Node* x) {
         const Node* mean = must(b.mean(x, std::vector<int64_t>{1}, true));
         const Node* d = must(b.binary(ir::Op::Sub, x, mean));
         const Node* var =
             must(b.mean(must(b.binary(ir::Op::Mul, d, d)), std::vector<int64_t>{1}, true));
         return must(b.binary(ir::Op::Div, d, must(b.unary(ir::Op::Sqrt, var))));
       },
       1, true},
      // The sum and its scale in one kernel, as a device's beam search fuses them (a kernel of
      // the scale alone differs from another size's in its float constant only: no sizes).
      {"mean",
       [=](ir::Builder& b, const Node* x) {
         return must(b.mean(x, std::vector<int64_t>{1}, false));
       },
       0, true},
      // A row's mean as the exponent of each element (the fuzz's seed 44): the scale is read
      // after the row's sum, where the float slot's value must already be.
      {"pow_by_mean",
       [=](ir::Builder& b, const Node* x) {
         const Node* base = must(b.binary(ir::Op::Add, must(b.unary(ir::Op::Abs, x)),
                                          must(b.scalar(1.0, ir::DType::f32))));
         return must(b.binary(ir::Op::Pow, base, must(b.mean(x, std::vector<int64_t>{1}, true))));
       },
       0, true},
      // x / n as x * (1/n): elementwise, so the general code's results are the same bits.
      {"over_n",
       [=](ir::Builder& b, const Node* x) {
         const double n = static_cast<double>(x->shape[1]);
         return must(b.binary(ir::Op::Mul, x, must(b.scalar(1.0 / n, ir::DType::f32))));
       },
       1},
      {"tanh_scaled",
       [=](ir::Builder& b, const Node* x) {
         const Node* t = must(b.unary(ir::Op::Tanh, x));
         return must(b.binary(ir::Op::Mul, t, must(b.scalar(3.0, ir::DType::f32))));
       }},
  };
}

Case named(const std::string& name) {
  for (const Case& c : cases())
    if (c.name == name) return c;
  KILN_CHECK(false) << "no case " << name;
  return {};
}

// The kernels of case `c` at x : f32[3, n], with their facts.
std::vector<passes::LoweredKernel> lower_at(const Case& c, int64_t n) {
  ir::Graph g;
  ir::Builder b(g);
  const Node* x = g.input(ir::DType::f32, {3, n});
  const Node* out = c.build(b, x);
  static const passes::CostModel model(passes::DeviceRates::reference_cpu());
  static const std::unique_ptr<passes::Fuser> beam = passes::make_beam_fuser(model);
  passes::LoweringOptions options;
  if (c.beam) options.fuser = beam.get();
  auto lowered = passes::run_lowering(g, {out}, options);
  KILN_CHECK(lowered.has_value()) << lowered.error().message;
  return std::move(lowered->kernels);
}

using Bytes = std::vector<std::vector<uint8_t>>;

// Parameters as bytes: inputs random (seeded by n), outputs zeroed.
Bytes buffers_for(const kir::Kernel& k, int64_t n) {
  std::mt19937 rng(static_cast<uint32_t>(n) * 7919u + 1);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  Bytes out;
  for (const kir::Param& p : k.params) {
    const auto count = static_cast<size_t>(ir::shape_numel(p.shape));
    std::vector<uint8_t> bytes(count * static_cast<size_t>(ir::dtype_size(p.dtype)), 0);
    if (!p.output && p.dtype == ir::DType::f32)
      for (size_t i = 0; i < count; ++i) {
        const float v = dist(rng);
        std::memcpy(bytes.data() + i * 4, &v, 4);
      }
    out.push_back(std::move(bytes));
  }
  return out;
}

// Runs `a` over [0, outer) in two pieces (the threads' cut), the sizes array after the buffers.
void run(const CpuArtifact& a, Bytes& bufs, const std::vector<int64_t>& sizes, int64_t outer) {
  std::vector<void*> args;
  for (auto& b : bufs) args.push_back(b.data());
  if (!sizes.empty()) args.push_back(const_cast<int64_t*>(sizes.data()));
  const int64_t mid = outer / 2;
  a.fn(args.data(), 0, mid);
  a.fn(args.data(), mid, outer);
}

double element(const std::vector<uint8_t>& b, ir::DType t, size_t i) {
  if (t == ir::DType::f32) {
    float v;
    std::memcpy(&v, b.data() + i * 4, 4);
    return v;
  }
  if (t == ir::DType::i32) {
    int32_t v;
    std::memcpy(&v, b.data() + i * 4, 4);
    return v;
  }
  if (t == ir::DType::i64) {
    int64_t v;
    std::memcpy(&v, b.data() + i * 8, 8);
    return static_cast<double>(v);
  }
  ADD_FAILURE() << "unexpected dtype " << ir::dtype_name(t);
  return NAN;
}

TEST(CpuKernelSizes, OneCompiledKernelServesEverySizeOfAnInnerAxis) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    std::vector<passes::LoweredKernel> at5 = lower_at(c, 5), at6 = lower_at(c, 6);
    ASSERT_EQ(at5.size(), at6.size());
    for (size_t k = 0; k < at6.size(); ++k) {
      std::optional<kir::Kernel> general = kir::generalize(at6[k].kernel, at5[k].kernel);
      ASSERT_TRUE(general.has_value()) << kir::print_kernel(at6[k].kernel);
      const std::string identity = kir::print_kernel(*general, false);
      EXPECT_NE(identity.find("size.0"), std::string::npos) << identity;
      EXPECT_EQ(identity.find("<6>"), std::string::npos) << identity;
      // A mean scales by 1/n, a float constant the kernel takes at run time as well.
      const bool mean = c.name == "mean" || c.name == "fused_layernorm" || c.name == "over_n" ||
                        c.name == "pow_by_mean";
      const std::vector<ir::DType> dtypes = kir::size_dtypes(*general);
      const auto real = std::ranges::find(dtypes, ir::DType::f32);
      const size_t scale = static_cast<size_t>(real - dtypes.begin());
      EXPECT_EQ(std::ranges::count(dtypes, ir::DType::f32), mean ? 1 : 0) << identity;
      if (mean) {
        ASSERT_NE(real, dtypes.end());
        EXPECT_NE(identity.find(fmt::format("size.{}:f32", scale)), std::string::npos) << identity;
        EXPECT_EQ(general->sizes[scale], std::bit_cast<int64_t>(1.0 / 6.0)) << identity;
        EXPECT_EQ(kir::size_values_text(*general)[scale], fmt::format("{}", 1.0 / 6.0));
      }
      const kir::KernelFacts facts = kir::analyze_kernel(*general);
      ASSERT_TRUE(cpu::serves_any_sizes(*general, facts, CheckMode::none)) << identity;
      auto code = backend().compile(*general, TuneParams{}, CheckMode::none, &facts);
      ASSERT_TRUE(code.has_value()) << code.error().message << "\n" << identity;
      if (c.name == "fused_softmax") {
        EXPECT_FALSE(facts.row_reuse.empty()) << identity;
        EXPECT_EQ((*code)->size_limits, std::vector<int64_t>{kir::kMaxRowReuseBytes / 4});
      }
      int instances = 0;

      // 256, 1000 and 1280: a kept row in whole prefetch blocks, with and without a partial one.
      for (int64_t n : {0, 1, 2, 3, 4, 7, 17, 64, 256, 1000, 1280, 40000}) {
        if (n < c.min_size) continue;
        SCOPED_TRACE(fmt::format("n = {}", n));
        std::vector<passes::LoweredKernel> at_n = lower_at(c, n);
        if (n < 2 && at_n.size() != at6.size()) continue;  // planned otherwise (size 0: nothing)
        ASSERT_EQ(at_n.size(), at6.size());
        const kir::Kernel& special = at_n[k].kernel;
        std::optional<kir::Kernel> instance = kir::match_sizes(*general, special);
        // Sizes 0 and 1 may lower to other kernels (specialization facts): those keep their own.
        if (n >= 2) {
          ASSERT_TRUE(instance.has_value()) << kir::print_kernel(special);
        }
        if (!instance) continue;
        if (mean) {
          EXPECT_EQ(instance->sizes[scale], std::bit_cast<int64_t>(1.0 / static_cast<double>(n)));
        }
        ++instances;
        // A kept row (the fused softmax) holds 64 KiB at most: a longer row keeps its own code,
        // which computes its values again (and the general code refuses to bind to it).
        const bool same_rows = cpu::serves_sizes_instance(facts, special, *at_n[k].facts);
        EXPECT_EQ(same_rows, facts.row_reuse.empty() || n * 4 <= kir::kMaxRowReuseBytes);
        if (!same_rows) {
          EXPECT_GT(n, (*code)->size_limits.at(0));
          continue;
        }
        EXPECT_EQ(kir::print_kernel(*instance, false), identity);
        Bytes mine = buffers_for(special, n), theirs = mine;
        run(**code, mine, instance->sizes, instance->outer_extent());
        auto own = backend().compile(special, TuneParams{});
        ASSERT_TRUE(own.has_value()) << own.error().message;
        run(**own, theirs, {}, (*own)->outer_extent);
        for (size_t p = 0; p < special.params.size(); ++p) {
          if (!special.params[p].output) continue;
          const ir::DType t = special.params[p].dtype;
          const size_t count = static_cast<size_t>(ir::shape_numel(special.params[p].shape));
          for (size_t i = 0; i < count; ++i) {
            const double a = element(mine[p], t, i), b = element(theirs[p], t, i);
            if (std::isnan(a) && std::isnan(b)) continue;
            if (t == ir::DType::f32)
              ASSERT_NEAR(a, b, 1e-5 * std::max(1.0, std::abs(b))) << "element " << i;
            else
              ASSERT_EQ(a, b) << "element " << i;
          }
        }
        // A float slot is the constant it stands for: with no sum between them (whose order
        // may differ at a size known when compiled), the two codes' results are the same bits.
        if (c.name == "over_n") {
          EXPECT_EQ(mine, theirs);
        }
      }
      EXPECT_GE(instances, 8) << "sizes 2 to 40000 run the general kernel";
    }
  }
}

// The fuzz's seed 44: over one axis of n, pow(|1 / (|sin(x/2)| + 1)| + 1, mean(sin(x/2))), the
// mean's sum a reduction inside the point's loop and its scale (a float slot) read after it. The
// slot's value is made before the loops, where every use sees it.
TEST(CpuKernelSizes, AFloatSlotReadAfterARowsSumInsideTheLoop) {
  auto lower = [](int64_t n) {
    ir::Graph g;
    ir::Builder b(g);
    auto must = [](ir::NodeResult r) {
      KILN_CHECK(r.has_value()) << r.error().message;
      return *r;
    };
    const Node* x = g.input(ir::DType::f32, {n});
    const Node* s = must(
        b.unary(ir::Op::Sin, must(b.binary(ir::Op::Mul, x, must(b.scalar(0.5, ir::DType::f32))))));
    const Node* one = must(b.scalar(1.0, ir::DType::f32));
    const Node* base = must(b.binary(
        ir::Op::Add,
        must(b.unary(
            ir::Op::Abs,
            must(b.unary(ir::Op::Recip,
                         must(b.binary(ir::Op::Add, must(b.unary(ir::Op::Abs, s)), one)))))),
        one));
    const Node* out =
        must(b.binary(ir::Op::Pow, base, must(b.mean(s, std::vector<int64_t>{0}, false))));
    static const passes::CostModel model(passes::DeviceRates::reference_cpu());
    static const std::unique_ptr<passes::Fuser> beam = passes::make_beam_fuser(model);
    passes::LoweringOptions options;
    options.fuser = beam.get();
    auto lowered = passes::run_lowering(g, {out}, options);
    KILN_CHECK(lowered.has_value()) << lowered.error().message;
    KILN_CHECK(lowered->kernels.size() == 1) << lowered->kernels.size() << " kernels";
    return std::move(lowered->kernels[0]);
  };
  std::optional<kir::Kernel> general = kir::generalize(lower(5).kernel, lower(3).kernel);
  ASSERT_TRUE(general.has_value());
  const std::string identity = kir::print_kernel(*general, false);
  const kir::KernelFacts facts = kir::analyze_kernel(*general);
  ASSERT_TRUE(cpu::serves_any_sizes(*general, facts, CheckMode::none)) << identity;
  auto code = backend().compile(*general, TuneParams{}, CheckMode::none, &facts);
  ASSERT_TRUE(code.has_value()) << code.error().message;
  for (int64_t n : {2, 7, 100}) {
    const passes::LoweredKernel special = lower(n);
    std::optional<kir::Kernel> instance = kir::match_sizes(*general, special.kernel);
    ASSERT_TRUE(instance.has_value()) << kir::print_kernel(special.kernel);
    Bytes mine = buffers_for(special.kernel, n), theirs = mine;
    run(**code, mine, instance->sizes, instance->outer_extent());
    auto own = backend().compile(special.kernel, TuneParams{});
    ASSERT_TRUE(own.has_value()) << own.error().message;
    run(**own, theirs, {}, (*own)->outer_extent);
    const size_t out = special.kernel.params.size() - 1;
    for (size_t i = 0; i < static_cast<size_t>(n); ++i)
      EXPECT_NEAR(element(mine[out], ir::DType::f32, i), element(theirs[out], ir::DType::f32, i),
                  1e-5);
  }
}

TEST(CpuKernelSizes, AKernelOfOtherFixedSizesOrAnotherShapeIsNoInstance) {
  const Case softmax = cases()[0];
  std::optional<kir::Kernel> general =
      kir::generalize(lower_at(softmax, 6)[0].kernel, lower_at(softmax, 5)[0].kernel);
  ASSERT_TRUE(general.has_value());
  // The rows (3) are fixed in the general kernel: a kernel of 4 rows is another kernel.
  ir::Graph g;
  ir::Builder b(g);
  const Node* x = g.input(ir::DType::f32, {4, 9});
  auto lowered = passes::run_lowering(g, {*b.softmax(x, 1)}, passes::LoweringOptions{});
  ASSERT_TRUE(lowered.has_value());
  EXPECT_FALSE(kir::match_sizes(*general, lowered->kernels[0].kernel).has_value());
  // Another graph of the same sizes.
  const Case sum = cases()[1];
  EXPECT_FALSE(kir::match_sizes(*general, lower_at(sum, 9)[0].kernel).has_value());
  // Nothing differs between a kernel and itself: no general kernel.
  EXPECT_FALSE(kir::generalize(lower_at(softmax, 5)[0].kernel, lower_at(softmax, 5)[0].kernel));
  // A general kernel's instance is not generalized again.
  EXPECT_FALSE(kir::generalize(*general, lower_at(softmax, 5)[0].kernel));
  // Kernels of one size that differ in a float constant alone: no run-time sizes.
  auto scaled = [](double s) {
    ir::Graph g;
    ir::Builder b(g);
    const Node* x = g.input(ir::DType::f32, {3, 8});
    const Node* y = *b.binary(ir::Op::Mul, x, *b.scalar(s, ir::DType::f32));
    auto lowered = passes::run_lowering(g, {y}, passes::LoweringOptions{});
    KILN_CHECK(lowered.has_value()) << lowered.error().message;
    return lowered->kernels[0].kernel;
  };
  EXPECT_FALSE(kir::generalize(scaled(2.0), scaled(3.0)).has_value());
  // Unless the caller knows a size changed between them (an unfused mean's scale by 1/n): then
  // the constant is a float slot, and the code made once computes another value's kernel bit
  // for bit.
  std::optional<kir::Kernel> by_float =
      kir::generalize(scaled(2.0), scaled(3.0), /*floats_alone=*/true);
  ASSERT_TRUE(by_float.has_value());
  EXPECT_EQ(kir::size_dtypes(*by_float), std::vector<ir::DType>{ir::DType::f32});
  const kir::Kernel quarter = scaled(0.25);
  std::optional<kir::Kernel> at_quarter = kir::match_sizes(*by_float, quarter);
  ASSERT_TRUE(at_quarter.has_value());
  EXPECT_EQ(at_quarter->sizes, std::vector<int64_t>{std::bit_cast<int64_t>(0.25)});
  const kir::KernelFacts float_facts = kir::analyze_kernel(*by_float);
  ASSERT_TRUE(cpu::serves_any_sizes(*by_float, float_facts, CheckMode::none));
  auto float_code = backend().compile(*by_float, TuneParams{}, CheckMode::none, &float_facts);
  ASSERT_TRUE(float_code.has_value()) << float_code.error().message;
  auto quarter_code = backend().compile(quarter, TuneParams{});
  ASSERT_TRUE(quarter_code.has_value()) << quarter_code.error().message;
  Bytes general_out = buffers_for(quarter, 8), own_out = general_out;
  run(**float_code, general_out, at_quarter->sizes, at_quarter->outer_extent());
  run(**quarter_code, own_out, {}, (*quarter_code)->outer_extent);
  EXPECT_EQ(general_out, own_out);
  EXPECT_NE(general_out.back(), std::vector<uint8_t>(general_out.back().size(), 0));
  // The key a caller keeps kernels by masks float constants too: a mean's kernels of every
  // size meet under one key (0.2:f32 and 0.1111111111111111:f32 are both #:f32).
  const Case mean = named("mean");
  const std::string key6 = kir::sizes_key(lower_at(mean, 6)[0].kernel);
  EXPECT_EQ(key6, kir::sizes_key(lower_at(mean, 9)[0].kernel));
  EXPECT_EQ(key6.find("0."), std::string::npos) << key6;
  EXPECT_NE(key6, kir::sizes_key(lower_at(cases()[1], 6)[0].kernel));  // a sum: no scale
  EXPECT_EQ(kir::sizes_key(scaled(1e-05)), kir::sizes_key(scaled(2.5)));
}

TEST(CpuKernelSizes, TheVerifierChecksSlotsAgainstTheInstance) {
  const Case softmax = cases()[0];
  std::optional<kir::Kernel> general =
      kir::generalize(lower_at(softmax, 6)[0].kernel, lower_at(softmax, 5)[0].kernel);
  ASSERT_TRUE(general.has_value());
  EXPECT_TRUE(kir::verify_kernel(*general).has_value());
  kir::Kernel wrong = *general;
  wrong.sizes[0] = 7;  // the domain still says 6
  auto bad = kir::verify_kernel(wrong);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("size.0 is 7"), std::string::npos) << bad.error().message;
  wrong.sizes.clear();
  bad = kir::verify_kernel(wrong);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("size.0 of 0"), std::string::npos) << bad.error().message;

  // A float slot (a mean's 1/n) is read as one dtype and is no extent.
  const Case mean = named("mean");
  std::optional<kir::Kernel> m =
      kir::generalize(lower_at(mean, 6)[0].kernel, lower_at(mean, 5)[0].kernel);
  ASSERT_TRUE(m.has_value());
  ASSERT_TRUE(kir::verify_kernel(*m).has_value()) << kir::verify_kernel(*m).error().message;
  kir::Kernel as_extent = *m;
  ASSERT_EQ(as_extent.domain, std::vector<int64_t>{3});
  as_extent.domain_slots = {1};  // size.1:f32 as the rows' count, its bits made 3
  as_extent.sizes[1] = 3;
  bad = kir::verify_kernel(as_extent);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("size.1 is f32 and an extent"), std::string::npos)
      << bad.error().message;
  kir::Kernel two_dtypes = *m;
  two_dtypes.stores[0].value = two_dtypes.arena->alu(
      kir::Alu::Add, ir::DType::f32,
      {two_dtypes.stores[0].value,
       two_dtypes.arena->alu(kir::Alu::Cast, ir::DType::f32, {two_dtypes.arena->size(1)})});
  bad = kir::verify_kernel(two_dtypes);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("is read as"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace kiln::codegen::testing
