// The cpu backend's attention kernels (codegen/cpu/attention_emitter.h): graphs lowered whole by
// passes::lower_group, recognized (kir::recognize_attention), run in one call and in chunks, and
// compared with a double-precision softmax(logits) v written out here; every schedule gives the
// same bits.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "codegen/cpu/attention_emitter.h"
#include "codegen/cpu/llvm_emitter.h"
#include "ir/builder.h"
#include "ir/kernel_sizes.h"
#include "passes/lower.h"
#include "tests/codegen/cpu_test_support.h"
#include "tests/support/must.h"

namespace kiln::codegen::testing {
namespace {

using ir::Node;
using ir::Op;
using ir::Shape;
using kiln::tests::must;

struct Graph {
  ir::Graph g;
  ir::Builder b{g};
  const Node* in(Shape s, const char* name) { return g.input(DType::f32, std::move(s), name); }
  const Node* bin(Op op, const Node* x, const Node* y) { return must(b.binary(op, x, y)); }
};

// Seeded values in [-2, 2], exact in f32.
std::vector<double> values(int64_t n, int seed) {
  std::vector<double> v(static_cast<size_t>(n));
  uint64_t s = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(seed + 1);
  for (double& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = static_cast<float>(static_cast<double>((s >> 33) % 4001) / 1000.0 - 2.0);
  }
  return v;
}

kir::Kernel lower(const Node* y, const std::vector<const Node*>& inputs) {
  passes::FusedGroup group;
  for (const Node* n : ir::topo_order({y}))
    if (std::ranges::count(inputs, n) == 0) group.nodes.push_back(n);
  group.outputs = {y};
  group.inputs = inputs;
  auto lowered = passes::lower_group(group, "attention");
  KILN_CHECK(lowered.has_value()) << lowered.error().message;
  return std::move(lowered->kernel);
}

// Batch b, query i, key j -> the logit, -inf where masked; q [B, Lq, D], k [B, Lk, D],
// v [B, Lk, Dv] (row-major), output [B, Lq, Dv] in double.
using Logit = std::function<double(int64_t b, int64_t i, int64_t j, double score)>;
std::vector<double> reference(const std::vector<double>& q, const std::vector<double>& k,
                              const std::vector<double>& v, int64_t batch, int64_t lq, int64_t lk,
                              int64_t d, int64_t dv, const Logit& logit) {
  std::vector<double> y(static_cast<size_t>(batch * lq * dv));
  std::vector<double> x(static_cast<size_t>(lk));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < lq; ++i) {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < lk; ++j) {
        double s = 0;
        for (int64_t t = 0; t < d; ++t)
          s += q[static_cast<size_t>((b * lq + i) * d + t)] * k[static_cast<size_t>((b * lk + j) * d + t)];
        x[static_cast<size_t>(j)] = logit(b, i, j, s);
        m = std::max(m, x[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (int64_t j = 0; j < lk; ++j) sum += std::exp(x[static_cast<size_t>(j)] - m);
      for (int64_t e = 0; e < dv; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < lk; ++j)
          acc += std::exp(x[static_cast<size_t>(j)] - m) / sum *
                 v[static_cast<size_t>((b * lk + j) * dv + e)];
        y[static_cast<size_t>((b * lq + i) * dv + e)] = acc;
      }
    }
  return y;
}

// Runs the kernel (whole and chunked: run_kernel compares them) with the output pre-filled with
// NaN except where `expect_nan` says the reference itself is NaN; checks every element.
void expect_matches(const kir::Kernel& kern, const std::vector<std::vector<double>>& in,
                    const std::vector<double>& want, const TuneParams& params = {}) {
  std::vector<Buffer> bufs;
  for (const auto& v : in) bufs.push_back(Buffer(DType::f32, v));
  bufs.push_back(Buffer(DType::f32, std::vector<double>(want.size(), NAN)));
  std::vector<Buffer> out = run_kernel(kern, bufs, params);
  ASSERT_EQ(out.size(), in.size() + 1);
  int bad = 0;
  for (size_t i = 0; i < want.size() && bad < 5; ++i) {
    const double got = out.back().get(i);
    const bool ok = std::isnan(want[i]) ? std::isnan(got) : std::abs(got - want[i]) <= 2e-5 * (1 + std::abs(want[i]));
    if (!ok) {
      ++bad;
      ADD_FAILURE() << "element " << i << ": got " << got << ", want " << want[i] << " ("
                    << params.str() << ")";
    }
  }
}

kir::AttentionPattern pattern_of(const kir::Kernel& kern) {
  const kir::KernelFacts facts = kir::analyze_kernel(kern);
  EXPECT_TRUE(facts.attention.has_value()) << kir::print_kernel(kern);
  EXPECT_FALSE(facts.matmul.has_value());
  return facts.attention.value_or(kir::AttentionPattern{});
}

TEST(CpuAttention, CausalCompositeWithOddSizes) {
  Graph f;
  const int64_t batch = 6, lq = 150, lk = 150, d = 40, dv = 24;
  const Node* q = f.in({2, 3, lq, d}, "q");
  const Node* k = f.in({2, 3, lk, d}, "k");
  const Node* v = f.in({2, 3, lk, dv}, "v");
  const kir::Kernel kern = lower(must(f.b.attention(q, k, v, true, 0.2)), {q, k, v});
  EXPECT_EQ(pattern_of(kern).causal_offset, std::optional<int64_t>(0));
  const auto qv = values(batch * lq * d, 1), kv = values(batch * lk * d, 2),
             vv = values(batch * lk * dv, 3);
  const auto want = reference(qv, kv, vv, batch, lq, lk, d, dv, [](int64_t, int64_t i, int64_t j, double s) {
    return j <= i ? s * 0.2 : -std::numeric_limits<double>::infinity();
  });
  expect_matches(kern, {qv, kv, vv}, want);
}

// The ops one by one: scores scaled, an additive mask read from a buffer, more keys than queries.
TEST(CpuAttention, AdditiveMaskFromABuffer) {
  Graph f;
  const int64_t batch = 2, lq = 33, lk = 129, d = 16, dv = 20;
  const Node* q = f.in({batch, lq, d}, "q");
  const Node* k = f.in({batch, lk, d}, "k");
  const Node* v = f.in({batch, lk, dv}, "v");
  const Node* mask = f.in({lq, lk}, "mask");
  const Node* kt = must(f.b.permute(k, {0, 2, 1}));
  const Node* s = f.bin(Op::Add, f.bin(Op::Mul, must(f.b.matmul(q, kt)), must(f.b.scalar(0.5, DType::f32))), mask);
  const kir::Kernel kern = lower(must(f.b.matmul(must(f.b.softmax(s, -1)), v)), {q, k, mask, v});
  EXPECT_FALSE(pattern_of(kern).causal_offset.has_value());
  EXPECT_EQ(pattern_of(kern).key_mask, nullptr) << "an additive mask, read per query row";
  const auto qv = values(batch * lq * d, 4), kv = values(batch * lk * d, 5),
             vv = values(batch * lk * dv, 6), mv = values(lq * lk, 7);
  const auto want = reference(qv, kv, vv, batch, lq, lk, d, dv, [&](int64_t, int64_t i, int64_t j, double sc) {
    return sc * 0.5 + static_cast<float>(mv[static_cast<size_t>(i * lk + j)]);
  });
  // Parameters in the order of the group's inputs (first use, as the fuser lists them).
  expect_matches(kern, {qv, kv, mv, vv}, want);
}

// Decode: one query row against a long key sequence, many heads.
TEST(CpuAttention, OneQueryRowAgainstManyKeys) {
  Graph f;
  const int64_t heads = 8, lk = 300, d = 32, dv = 32;
  const Node* q = f.in({1, heads, 1, d}, "q");
  const Node* k = f.in({1, heads, lk, d}, "k");
  const Node* v = f.in({1, heads, lk, dv}, "v");
  const kir::Kernel kern = lower(must(f.b.attention(q, k, v, false, 0.125)), {q, k, v});
  pattern_of(kern);
  const auto qv = values(heads * d, 8), kv = values(heads * lk * d, 9), vv = values(heads * lk * dv, 10);
  const auto want = reference(qv, kv, vv, heads, 1, lk, d, dv,
                              [](int64_t, int64_t, int64_t, double s) { return s * 0.125; });
  expect_matches(kern, {qv, kv, vv}, want);
}

// A mask that hides every key from row 0 (j <= i - 1): the reference's softmax of all -inf is
// NaN (exp(-inf - -inf)); the other rows see keys up to i - 1, and whole tiles are skipped.
TEST(CpuAttention, ARowWithEveryKeyMaskedIsNaN) {
  Graph f;
  const int64_t lq = 100, lk = 100, d = 8, dv = 8;
  const Node* q = f.in({lq, d}, "q");
  const Node* k = f.in({lk, d}, "k");
  const Node* v = f.in({lk, dv}, "v");
  const Node* i = must(f.b.reshape(must(f.b.arange(0, lq, 1, DType::i32)), {lq, 1}));
  const Node* j = must(f.b.reshape(must(f.b.arange(0, lk, 1, DType::i32)), {1, lk}));
  const Node* visible = f.bin(Op::Gt, i, j);  // j <= i - 1
  const Node* ninf = must(f.b.scalar(-std::numeric_limits<double>::infinity(), DType::f32));
  const Node* s = must(f.b.where(visible, must(f.b.matmul(q, must(f.b.permute(k, {1, 0})))), ninf));
  const kir::Kernel kern = lower(must(f.b.matmul(must(f.b.softmax(s, -1)), v)), {q, k, v});
  EXPECT_EQ(pattern_of(kern).causal_offset, std::optional<int64_t>(-1));
  const auto qv = values(lq * d, 11), kv = values(lk * d, 12), vv = values(lk * dv, 13);
  const auto want = reference(qv, kv, vv, 1, lq, lk, d, dv, [](int64_t, int64_t r, int64_t c, double sc) {
    return c < r ? sc : -std::numeric_limits<double>::infinity();
  });
  for (int64_t e = 0; e < dv; ++e) ASSERT_TRUE(std::isnan(want[static_cast<size_t>(e)]));
  expect_matches(kern, {qv, kv, vv}, want);
}

// A NaN logit makes its row NaN, wherever it falls: in the first key tile, in the last (partial)
// one, or as the only unmasked logit of a tile after one in which every key of the row was masked
// (while the running max is still -inf). Rows without one are untouched.
TEST(CpuAttention, ANaNLogitMakesItsRowNaN) {
  Graph f;
  const int64_t lq = 8, lk = 200, d = 16, dv = 24;
  const Node* q = f.in({lq, d}, "q");
  const Node* k = f.in({lk, d}, "k");
  const Node* v = f.in({lk, dv}, "v");
  const Node* mask = f.in({lq, lk}, "mask");
  const Node* kt = must(f.b.permute(k, {1, 0}));
  const Node* s = f.bin(Op::Add, f.bin(Op::Mul, must(f.b.matmul(q, kt)), must(f.b.scalar(0.5, DType::f32))), mask);
  const kir::Kernel kern = lower(must(f.b.matmul(must(f.b.softmax(s, -1)), v)), {q, k, mask, v});
  const double ninf = -std::numeric_limits<double>::infinity();
  std::vector<double> mv(static_cast<size_t>(lq * lk), 0.0);
  auto m = [&](int64_t i, int64_t j) -> double& { return mv[static_cast<size_t>(i * lk + j)]; };
  for (int64_t j = 0; j < 128; ++j) m(3, j) = ninf;
  m(3, 100) = NAN;  // the only unmasked logit of its tile, after a whole masked tile
  m(5, 0) = NAN;    // the first key
  m(6, lk - 1) = NAN;  // the last, partial tile
  for (int64_t j = 0; j < lk; j += 3) m(1, j) = ninf;  // masked keys, no NaN
  const auto qv = values(lq * d, 21), kv = values(lk * d, 22), vv = values(lk * dv, 23);
  const auto want = reference(qv, kv, vv, 1, lq, lk, d, dv, [&](int64_t, int64_t i, int64_t j, double sc) {
    return sc * 0.5 + m(i, j);
  });
  for (int64_t i = 0; i < lq; ++i)
    EXPECT_EQ(std::isnan(want[static_cast<size_t>(i * dv)]), i == 3 || i == 5 || i == 6) << i;
  for (int tile : {0, 16})
    for (int lanes : {0, 8}) {
      TuneParams p;
      p.tile = tile;
      p.vector_width = lanes;
      expect_matches(kern, {qv, kv, mv, vv}, want, p);
    }
}

// Decode over a cache longer than the step's position: where(j <= pos, s, -inf) with pos read
// from a buffer (a key mask: the same for every query row). Key tiles past pos are skipped, K and
// V unpacked: value rows there hold NaN and the results still match the reference computed with
// finite rows, since those rows are never read. A position before the first key masks every key
// (NaN, as the reference's exp(-inf - -inf)).
TEST(CpuAttention, AKeyMaskFromABufferSkipsTheTilesItEmpties) {
  Graph f;
  const int64_t heads = 4, lk = 300, d = 32, dv = 24;
  const Node* q = f.in({heads, 1, d}, "q");
  const Node* k = f.in({heads, lk, d}, "k");
  const Node* v = f.in({heads, lk, dv}, "v");
  const Node* pos = f.in({1}, "pos");
  const Node* j = must(f.b.reshape(must(f.b.arange(0, lk, 1, DType::f32)), {1, 1, lk}));
  const Node* ninf = must(f.b.scalar(-std::numeric_limits<double>::infinity(), DType::f32));
  const Node* scores = f.bin(Op::Mul, must(f.b.matmul(q, must(f.b.permute(k, {0, 2, 1})))),
                             must(f.b.scalar(0.25, DType::f32)));
  const Node* s = must(f.b.where(f.bin(Op::Le, j, pos), scores, ninf));
  const kir::Kernel kern = lower(must(f.b.matmul(must(f.b.softmax(s, -1)), v)), {q, k, pos, v});
  EXPECT_FALSE(pattern_of(kern).causal_offset.has_value());
  ASSERT_NE(pattern_of(kern).key_mask, nullptr);
  EXPECT_NE(kir::facts_text(kern, kir::analyze_kernel(kern)).find(", key mask: $"),
            std::string::npos)
      << kir::facts_text(kern, kir::analyze_kernel(kern));
  const auto qv = values(heads * d, 31), kv = values(heads * lk * d, 32),
             vv = values(heads * lk * dv, 33);
  for (const int64_t at : std::vector<int64_t>{-1, 0, 63, 64, 200, lk - 1}) {
    SCOPED_TRACE(fmt::format("pos {}", at));
    const auto want =
        reference(qv, kv, vv, heads, 1, lk, d, dv, [&](int64_t, int64_t, int64_t key, double sc) {
          return key <= at ? sc * 0.25 : -std::numeric_limits<double>::infinity();
        });
    EXPECT_EQ(std::isnan(want[0]), at < 0);
    // NaN in the value rows of every tile that starts past pos.
    std::vector<double> poisoned = vv;
    const int64_t first_dead =
        at < 0 ? 0 : (at / cpu::kAttentionKeyTile + 1) * cpu::kAttentionKeyTile;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t key = first_dead; key < lk; ++key)
        for (int64_t e = 0; e < dv; ++e)
          poisoned[static_cast<size_t>((h * lk + key) * dv + e)] = NAN;
    for (int tile : {0, 16})
      for (int lanes : {0, 8}) {
        TuneParams p;
        p.tile = tile;
        p.vector_width = lanes;
        expect_matches(kern, {qv, kv, {static_cast<double>(at)}, poisoned}, want, p);
      }
  }
}

// Query rows per block and the micro-kernels' lanes change the loop nest, not the sums' order:
// every schedule gives the same bits (as every ISA does: this suite also runs for x86-64-v3).
TEST(CpuAttention, EverySchedulePrintsTheSameBits) {
  Graph f;
  const int64_t batch = 3, lq = 200, lk = 200, d = 24, dv = 40;
  const Node* q = f.in({batch, lq, d}, "q");
  const Node* k = f.in({batch, lk, d}, "k");
  const Node* v = f.in({batch, lk, dv}, "v");
  const kir::Kernel kern = lower(must(f.b.attention(q, k, v, true, 0.3)), {q, k, v});
  std::vector<Buffer> in{Buffer(DType::f32, values(batch * lq * d, 14)),
                         Buffer(DType::f32, values(batch * lk * d, 15)),
                         Buffer(DType::f32, values(batch * lk * dv, 16))};
  std::vector<uint8_t> first;
  for (int tile : {0, 16, 32, 64, 128})
    for (int lanes : {0, 8, 16}) {
      TuneParams p;
      p.tile = tile;
      p.vector_width = lanes;
      std::vector<Buffer> out = run_kernel(kern, in, p);
      ASSERT_EQ(out.size(), 4u);
      if (first.empty()) first = out[3].bytes;
      EXPECT_EQ(out[3].bytes, first) << p.str();
    }
}

// Attention over a cache read to any length (a decoder's keys and values growing a row a step):
// the kernels lowered at two key counts make one general kernel whose key count is a run-time
// size; compiled once, it computes the kernel of every other count (below a tile, at a tile's
// edges, over several tiles) to the same bits as that count's own code, and as the reference.
// K's and V's batch strides (n * d, n * dv) are sizes the expressions read. With a decoder's key
// mask too.
TEST(CpuAttention, OneKernelServesEveryKeyCount) {
  constexpr int64_t heads = 2, lq = 3, d = 16, dv = 12;
  for (const bool masked : {false, true}) {
    SCOPED_TRACE(masked ? "key mask" : "no mask");
    const auto lower_at = [&](int64_t n) {
      Graph f;
      const Node* q = f.in({heads, lq, d}, "q");
      const Node* k = f.in({heads, n, d}, "k");
      const Node* v = f.in({heads, n, dv}, "v");
      const Node* pos = f.in({1}, "pos");
      const Node* scores = f.bin(Op::Mul, must(f.b.matmul(q, must(f.b.permute(k, {0, 2, 1})))),
                                 must(f.b.scalar(0.25, DType::f32)));
      if (masked) {
        const Node* j = must(f.b.reshape(must(f.b.arange(0, n, 1, DType::f32)), {1, 1, n}));
        const Node* ninf = must(f.b.scalar(-std::numeric_limits<double>::infinity(), DType::f32));
        scores = must(f.b.where(f.bin(Op::Le, j, pos), scores, ninf));
      }
      return lower(
          must(f.b.matmul(must(f.b.softmax(scores, -1)), v)),
          masked ? std::vector<const Node*>{q, k, pos, v} : std::vector<const Node*>{q, k, v});
    };
    std::optional<kir::Kernel> general = kir::generalize(lower_at(6), lower_at(5));
    ASSERT_TRUE(general.has_value());
    const kir::KernelFacts facts = kir::analyze_kernel(*general);
    ASSERT_TRUE(facts.attention.has_value()) << kir::print_kernel(*general);
    EXPECT_EQ(facts.attention->keys_slot, 0) << kir::print_kernel(*general);
    ASSERT_TRUE(cpu::serves_any_sizes(*general, facts, CheckMode::none))
        << kir::print_kernel(*general);
    auto code = backend().compile(*general, TuneParams{}, CheckMode::none, &facts);
    ASSERT_TRUE(code.has_value()) << code.error().message;
    // The key count, and K's and V's batch strides (n * d, n * dv).
    EXPECT_EQ((*code)->size_slots, 3);
    int instances = 0;
    for (const int64_t n : {1, 2, 3, 63, 64, 65, 130, 200}) {
      SCOPED_TRACE(fmt::format("{} keys", n));
      const kir::Kernel special = lower_at(n);
      std::optional<kir::Kernel> instance = kir::match_sizes(*general, special);
      if (n >= 2) {
        ASSERT_TRUE(instance.has_value()) << kir::print_kernel(special);
      }
      if (!instance) continue;  // one key may lower otherwise (a reduction over one)
      ++instances;
      const int64_t at = n / 2;  // the key mask's last visible key
      const auto qv = values(heads * lq * d, 41), kv = values(heads * n * d, 42),
                 vv = values(heads * n * dv, 43);
      std::vector<std::vector<float>> bufs;
      for (const auto* in : {&qv, &kv}) bufs.emplace_back(in->begin(), in->end());
      if (masked) bufs.push_back({static_cast<float>(at)});
      bufs.emplace_back(vv.begin(), vv.end());
      bufs.emplace_back(static_cast<size_t>(heads * lq * dv), NAN);
      std::vector<std::vector<float>> own_bufs = bufs;
      const auto call = [](const CpuArtifact& a, std::vector<std::vector<float>>& b,
                           const std::vector<int64_t>& sizes, int64_t outer) {
        std::vector<void*> args;
        for (auto& x : b) args.push_back(x.data());
        if (!sizes.empty()) args.push_back(const_cast<int64_t*>(sizes.data()));
        a.fn(args.data(), 0, outer / 2);  // in two pieces, as the threads cut it
        a.fn(args.data(), outer / 2, outer);
      };
      call(**code, bufs, instance->sizes, cpu::attention_units(special, [&] {
        cpu::EmitOptions o;
        o.facts = &facts;
        return o;
      }()));
      auto own = backend().compile(special, TuneParams{});
      ASSERT_TRUE(own.has_value()) << own.error().message;
      call(**own, own_bufs, {}, (*own)->outer_extent);
      const auto want =
          reference(qv, kv, vv, heads, lq, n, d, dv, [&](int64_t, int64_t, int64_t key, double sc) {
            return !masked || key <= at ? sc * 0.25 : -std::numeric_limits<double>::infinity();
          });
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(bufs.back()[i], want[i], 2e-5 * (1 + std::abs(want[i]))) << "element " << i;
        ASSERT_EQ(bufs.back()[i], own_bufs.back()[i])
            << "element " << i << ": not its own code's bits";
      }
    }
    EXPECT_GE(instances, 7);
  }
}

// Work units are (batch point, block of query rows): the runtime splits them over threads.
TEST(CpuAttention, UnitsAreBatchPointsTimesQueryBlocks) {
  Graph f;
  const Node* q = f.in({2, 4, 100, 16}, "q");
  const Node* k = f.in({2, 4, 100, 16}, "k");
  const Node* v = f.in({2, 4, 100, 16}, "v");
  const kir::Kernel kern = lower(must(f.b.attention(q, k, v, true, 0.25)), {q, k, v});
  const kir::KernelFacts facts = kir::analyze_kernel(kern);
  cpu::EmitOptions opt;
  opt.facts = &facts;
  opt.params.tile = 32;
  EXPECT_EQ(cpu::attention_units(kern, opt), 2 * 4 * 4);
  opt.params.tile = 128;
  EXPECT_EQ(cpu::attention_units(kern, opt), 2 * 4 * 1);
}

}  // namespace
}  // namespace kiln::codegen::testing
