// The cpu backend's matmul kernels: graphs lowered by passes::lower_group (plain, odd sizes,
// batched and broadcast batches, transposed B, prologues, epilogues, several outputs), run whole
// and in chunks against a double-precision loop; the recognizer's accepts and rejects.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <thread>

#include "codegen/cpu/matmul_emitter.h"
#include "codegen/cpu/matmul_recognizer.h"
#include "ir/builder.h"
#include "passes/lower.h"
#include "tests/codegen/cpu_test_support.h"
#include "tests/support/must.h"

namespace kiln::codegen::testing {
namespace {

using ir::Node;
using ir::Op;
using ir::Shape;

using kiln::tests::must;

// Multiples of 1/8 in [-1, 1]: products and their sums are exact in f32, so any wrong term shows.
std::vector<double> values(int64_t n, int seed) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<double>((i * (2 * seed + 5) + seed) % 17 - 8) / 8;
  return v;
}

// One fused group computing `outputs` from the buffers `inputs`, lowered like the runtime does.
kir::Kernel lower(const std::vector<const Node*>& outputs, const std::vector<const Node*>& inputs) {
  passes::FusedGroup group;
  for (const Node* n : ir::topo_order(outputs))
    if (std::ranges::count(inputs, n) == 0) group.nodes.push_back(n);
  group.outputs = outputs;
  group.inputs = inputs;
  auto lowered = passes::lower_group(group, "mm");
  KILN_CHECK(lowered.has_value()) << lowered.error().message;
  return std::move(lowered->kernel);
}

// [batch..., M, K] @ [batch..., K, N] in double, batch axes broadcast (right-aligned).
std::vector<double> ref_matmul(const std::vector<double>& a, const Shape& as,
                               const std::vector<double>& b, const Shape& bs, const Shape& out) {
  const size_t rank = out.size();
  const int64_t m = out[rank - 2], n = out[rank - 1], kk = as.back();
  const int64_t batches = ir::shape_numel(out) / (m * n);
  std::vector<double> y(static_cast<size_t>(batches * m * n));
  // The offset (in matrices) of output batch `ob` in an operand with batch shape `s`.
  auto batch_offset = [&](const Shape& s, int64_t ob) {
    int64_t off = 0, stride = 1, rest = ob;
    for (size_t d = rank - 2; d-- > 0;) {
      const int64_t idx = rest % out[d];
      rest /= out[d];
      const ptrdiff_t sd = static_cast<ptrdiff_t>(d) - static_cast<ptrdiff_t>(rank - s.size());
      if (sd < 0) continue;
      off += (s[sd] == 1 ? 0 : idx) * stride;
      stride *= s[sd];
    }
    return off;
  };
  for (int64_t ob = 0; ob < batches; ++ob) {
    const int64_t ao = batch_offset(as, ob) * m * kk, bo = batch_offset(bs, ob) * kk * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t k = 0; k < kk; ++k) s += a[ao + i * kk + k] * b[bo + k * n + j];
        y[(ob * m + i) * n + j] = s;
      }
  }
  return y;
}

// Runs `k` (outputs pre-filled with NaN, so that a missed element fails) and returns the
// buffers; also checks which emitter compiled it (the tiled path mallocs its B panel).
// `scratch`: whether the emitter mallocs (default: a recognized matmul with K > 0; the
// dot-per-column path of a transposed b needs none).
std::vector<Buffer> run_matmul(const kir::Kernel& k, const std::vector<std::vector<double>>& in,
                               bool expect_tiled = true, const TuneParams& params = {},
                               std::optional<bool> scratch = std::nullopt) {
  const std::optional<cpu::MatmulPattern> pattern = cpu::matmul_of(kir::analyze_kernel(k));
  EXPECT_EQ(pattern.has_value(), expect_tiled) << kir::print_kernel(k);
  // With K = 0 the optimizer rightly drops the unused panel.
  const bool panel = scratch.value_or(expect_tiled && pattern && pattern->k_extent > 0);
  std::vector<Buffer> bufs;
  for (size_t p = 0; p < k.params.size(); ++p) {
    const size_t n = static_cast<size_t>(ir::shape_numel(k.params[p].shape));
    bufs.push_back(p < in.size() ? Buffer(k.params[p].dtype, in[p])
                                 : Buffer(k.params[p].dtype, std::vector<double>(n, NAN)));
  }
  std::shared_ptr<const CpuArtifact> art;
  std::vector<Buffer> out = run_kernel(k, bufs, params, &art);
  if (art) {
    EXPECT_EQ(art->llvm_ir.find("@malloc") != std::string::npos, panel) << art->llvm_ir;
  }
  return out;
}

void expect_near(const Buffer& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < want.size() && bad < 5; ++i)
    if (!(rel_error(got.get(i), want[i], 1) <= 1e-5)) {
      ++bad;
      ADD_FAILURE() << "element " << i << ": got " << got.get(i) << ", want " << want[i];
    }
}

struct Graph {
  ir::Graph g;
  ir::Builder b{g};
  const Node* in(Shape s, const char* name, ir::DType t = ir::DType::f32) {
    return g.input(t, std::move(s), name);
  }
};

// C = A @ B for A [..., M, K], B [..., K, N] given as graph inputs.
// (One column, a matrix times a vector, is a row of dot products: the reduction path, not the
// matmul emitter.)
void check_plain(const Shape& as, const Shape& bs, const TuneParams& params = {}) {
  Graph f;
  const Node* a = f.in(as, "a");
  const Node* b = f.in(bs, "b");
  const Node* y = must(f.b.matmul(a, b));
  const auto av = values(ir::shape_numel(as), 1), bv = values(ir::shape_numel(bs), 2);
  auto out = run_matmul(lower({y}, {a, b}), {av, bv}, y->shape.back() != 1, params);
  if (out.size() == 3) expect_near(out[2], ref_matmul(av, as, bv, bs, y->shape));
}

TEST(CpuMatmul, OddSizes) {
  check_plain({37, 29}, {29, 53});
  check_plain({1, 64}, {64, 64});
  check_plain({64, 7}, {7, 1});
  check_plain({6, 1}, {1, 16});
  check_plain({13, 300}, {300, 35});
}

// A dot product of 2048 equal terms: the row-of-dot-products path sums in blocks (one
// accumulator down K was 2e-5 relative off, past the random-graph fuzz's tolerance).
TEST(CpuMatmul, OneColumnSumsInBlocks) {
  Graph f;
  const Node* a = f.in({1, 2048}, "a");
  const Node* b = f.in({2048, 1}, "b");
  const Node* y = must(f.b.matmul(a, b));
  const std::vector<double> av(2048, 2.6728107929229736), bv(2048, 2.6728107929229736);
  auto out = run_matmul(lower({y}, {a, b}), {av, bv}, /*expect_tiled=*/false);
  ASSERT_EQ(out.size(), 3u);
  const double term = static_cast<double>(static_cast<float>(2.6728107929229736));
  EXPECT_NEAR(out[2].get(0), 2048 * term * term, 2048 * term * term * 2e-6);
}

TEST(CpuMatmul, ManyRowsAndColumnBlocks) {
  check_plain({130, 70}, {70, 97});
  check_plain({20, 3000}, {3000, 150});  // B blocks narrower than N
  check_plain({1, 130, 700}, {700, 1000});  // a unit batch axis
}

// vector_width picks the register tile's lanes (the host's choice is tested everywhere else).
TEST(CpuMatmul, EveryTileWidth) {
  for (int lanes : {4, 8, 16}) {
    SCOPED_TRACE(lanes);
    check_plain({37, 29}, {29, 53}, TuneParams{lanes, 0});
    check_plain({2, 13, 300}, {300, 35}, TuneParams{lanes, 0});
    check_plain({30, 5}, {5, 9}, TuneParams{lanes, 0});
  }
}

// At most kGemvMaxRows rows and unit batch axes: the matrix-vector path, whose range counts
// blocks of kGemvBlockColumns columns (run_kernel also runs it in uneven chunks of blocks), run
// one stripe of blocks per thread (chunks_per_thread 1). More rows and unit batch axes: the
// tiled path over units of a column block and a row group; a batch: the tiled path over the
// outer batch axis. Those run one stripe per thread too, since each call packs the blocks of b
// it meets. Returns the range and the chunks per thread.
std::pair<size_t, int> gemv_blocks(const Shape& as, const Shape& bs) {
  Graph f;
  const Node* a = f.in(as, "a");
  const Node* b = f.in(bs, "b");
  auto art = backend().compile(lower({must(f.b.matmul(a, b))}, {a, b}), {});
  EXPECT_TRUE(art.has_value()) << art.error().message;
  if (!art) return {0, -1};
  return {static_cast<size_t>((*art)->outer_extent), (*art)->chunks_per_thread};
}

TEST(CpuMatmul, MatrixVectorProductsRunOverColumnBlocks) {
  struct Case {
    Shape a, b;
    size_t blocks;
  };
  const Case cases[] = {{{1, 200}, {200, 1000}, 16}, {{3, 50}, {50, 3000}, 47},
                        {{4, 7}, {7, 130}, 3},       {{1, 1, 33}, {33, 70}, 2},
                        {{2, 300}, {300, 5}, 1},     {{1, 4096}, {4096, 64}, 1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.a) + " @ " + ::testing::PrintToString(c.b));
    check_plain(c.a, c.b);
    EXPECT_EQ(gemv_blocks(c.a, c.b), std::make_pair(c.blocks, 1));
  }
  // Five rows take the tiled path: one column block and one row group of MR (6) rows. A batch
  // of two takes it over the batch axis.
  EXPECT_EQ(gemv_blocks({5, 9}, {9, 70}), std::make_pair(size_t{1}, 1));
  EXPECT_EQ(gemv_blocks({2, 1, 9}, {9, 70}), std::make_pair(size_t{2}, 1));
  for (int lanes : {4, 8, 16}) {
    SCOPED_TRACE(lanes);
    check_plain({2, 77}, {77, 333}, TuneParams{lanes, 0});
  }
}

// A product of one batch point splits its range into units of a column block (as many panels as
// fit kBlockBytes of b) and a group of rows (a multiple of MR): each unit's block of b is packed
// by the call that runs it, not by every call. run_kernel runs the range in uneven chunks, which
// cut blocks between calls.
TEST(CpuMatmul, OneProductSplitsIntoColumnBlocksAndRowGroups) {
  // K = 700: 2 panels of 64 columns a block with AVX-512 (8 blocks of 128 columns, 8 row groups
  // of 18 rows), 11 of 16 with AVX2 (6 blocks of 176 columns, 11 row groups of 12 rows).
  const auto [units, per_thread] = gemv_blocks({130, 700}, {700, 1000});
  EXPECT_TRUE(units == 8 * 8 || units == 6 * 11) << units;
  EXPECT_EQ(per_thread, 1);
  for (int lanes : {8, 16}) {
    SCOPED_TRACE(lanes);
    check_plain({130, 700}, {700, 1000}, TuneParams{lanes, 0});
    check_plain({7, 700}, {700, 1000}, TuneParams{lanes, 0});  // one row group
  }
}

TEST(CpuMatmul, MatrixVectorPrologueEpilogueAndEmptyReduction) {
  // y = relu(x @ w^T + bias) with x one row: b is read through a transpose.
  Graph f;
  const Node* x = f.in({1, 45}, "x");
  const Node* wt = f.in({150, 45}, "wt");
  const Node* bias = f.in({150}, "bias");
  const Node* mm = must(f.b.matmul(x, must(f.b.permute(wt, {1, 0}))));
  const Node* y = must(f.b.unary(Op::Relu, must(f.b.binary(Op::Add, mm, bias))));
  const auto xv = values(45, 19), wtv = values(150 * 45, 20), bv = values(150, 21);
  std::vector<double> wv(wtv.size());
  for (int64_t k = 0; k < 45; ++k)
    for (int64_t j = 0; j < 150; ++j) wv[k * 150 + j] = wtv[j * 45 + k];
  // A dot product per column, b read in place: no scratch.
  auto out = run_matmul(lower({y}, {x, wt, bias}), {xv, wtv, bv}, true, {}, /*scratch=*/false);
  auto want = ref_matmul(xv, {1, 45}, wv, {45, 150}, y->shape);
  for (size_t e = 0; e < want.size(); ++e) want[e] = std::max(want[e] + bv[e], 0.0);
  if (out.size() == 4) expect_near(out[3], want);

  // K = 0: every output is 0 (the accumulators start at zero, no row of b is read).
  Graph g;
  const Node* a0 = g.in({3, 0}, "a");
  const Node* b0 = g.in({0, 19}, "b");
  std::vector<Buffer> bufs = {Buffer(ir::DType::f32, std::vector<double>{}),
                              Buffer(ir::DType::f32, std::vector<double>{}),
                              Buffer(ir::DType::f32, std::vector<double>(57, NAN))};
  std::vector<Buffer> zeros = run_kernel(lower({must(g.b.matmul(a0, b0))}, {a0, b0}), bufs);
  if (zeros.size() == 3) expect_near(zeros[2], std::vector<double>(57, 0.0));
}

TEST(CpuMatmul, Batched) {
  check_plain({3, 5, 9}, {3, 9, 20});
  check_plain({2, 1, 7, 4}, {3, 4, 17});  // broadcast on both sides
}

TEST(CpuMatmul, BroadcastBatch) {
  check_plain({2, 3, 5, 9}, {9, 20});
  check_plain({11, 9}, {4, 9, 20});
}

TEST(CpuMatmul, EmptyReductionGivesZeros) {
  check_plain({5, 0}, {0, 19});
}

// The runtime calls one artifact from several threads on disjoint ranges: the scratch is per call.
TEST(CpuMatmul, ConcurrentChunksAgreeWithOneCall) {
  Graph f;
  const Node* a = f.in({97, 40}, "a");
  const Node* b = f.in({40, 150}, "b");
  const Node* y = must(f.b.matmul(a, b));
  const kir::Kernel k = lower({y}, {a, b});
  auto art = backend().compile(k, {});
  ASSERT_TRUE(art.has_value()) << art.error().message;
  const auto av = values(97 * 40, 17), bv = values(40 * 150, 18);
  std::vector<float> af(av.begin(), av.end()), bf(bv.begin(), bv.end());
  std::vector<float> whole(97 * 150, NAN), split(97 * 150, NAN);
  void* one[] = {af.data(), bf.data(), whole.data()};
  void* many[] = {af.data(), bf.data(), split.data()};
  // The range counts the tiled path's units: one column block x 17 row groups of 6 rows.
  const int64_t range = (*art)->outer_extent;
  ASSERT_GE(range, 4);
  (*art)->fn(one, 0, range);
  std::vector<std::thread> threads;
  for (int64_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] { (*art)->fn(many, range * t / 4, range * (t + 1) / 4); });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)), 0);
  const auto want = ref_matmul(av, {97, 40}, bv, {40, 150}, y->shape);
  EXPECT_NEAR(whole[96 * 150 + 149], want[96 * 150 + 149], 1e-5);
}

TEST(CpuMatmul, TransposedB) {
  Graph f;
  const Node* a = f.in({23, 31}, "a");
  const Node* bt = f.in({41, 31}, "bt");
  const Node* y = must(f.b.matmul(a, must(f.b.permute(bt, {1, 0}))));
  const auto av = values(23 * 31, 3), btv = values(41 * 31, 4);
  std::vector<double> bv(btv.size());
  for (int64_t k = 0; k < 31; ++k)
    for (int64_t j = 0; j < 41; ++j) bv[k * 41 + j] = btv[j * 31 + k];
  auto out = run_matmul(lower({y}, {a, bt}), {av, btv});
  if (out.size() == 3) expect_near(out[2], ref_matmul(av, {23, 31}, bv, {31, 41}, y->shape));
}

// b read through a transposed view (x Wᵀ: ONNX's Gemm with transB, torch's Linear). At most
// kGemvMaxRows rows: one dot product per column and row, b read in place (no scratch), 16 lanes
// and then the k past the last multiple of 16; more rows: the tiled path, b packed column by
// column. Odd K and N (a partial column block), and a relu prologue on a (read element by element
// rather than as one vector).
TEST(CpuMatmul, TransposedBOfFewRowsIsADotPerColumn) {
  for (const int64_t m : {1, 2, 3, 4, 9})
    for (const int64_t k : {5, 16, 83})
      for (const bool relu : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "M " << m << ", K " << k << (relu ? ", relu" : ""));
        constexpr int64_t n = 70;
        Graph f;
        const Node* a = f.in({m, k}, "a");
        const Node* bt = f.in({n, k}, "bt");
        const Node* lhs = relu ? must(f.b.unary(Op::Relu, a)) : a;
        const Node* y = must(f.b.matmul(lhs, must(f.b.permute(bt, {1, 0}))));
        auto av = values(m * k, 7);
        const auto btv = values(n * k, 8);
        std::vector<double> bv(btv.size());
        for (int64_t kk = 0; kk < k; ++kk)
          for (int64_t j = 0; j < n; ++j) bv[kk * n + j] = btv[j * k + kk];
        auto out = run_matmul(lower({y}, {a, bt}), {av, btv}, true, {}, m > cpu::kGemvMaxRows);
        if (relu)
          for (double& v : av) v = std::max(v, 0.0);
        if (out.size() == 3) expect_near(out[2], ref_matmul(av, {m, k}, bv, {k, n}, y->shape));
      }
}

TEST(CpuMatmul, ReluPrologueOnA) {
  Graph f;
  const Node* a = f.in({19, 27}, "a");
  const Node* b = f.in({27, 45}, "b");
  const Node* y = must(f.b.matmul(must(f.b.unary(Op::Relu, a)), b));
  auto av = values(19 * 27, 5);
  const auto bv = values(27 * 45, 6);
  auto out = run_matmul(lower({y}, {a, b}), {av, bv});
  for (double& v : av) v = std::max(v, 0.0);
  if (out.size() == 3) expect_near(out[2], ref_matmul(av, {19, 27}, bv, {27, 45}, y->shape));
}

TEST(CpuMatmul, BiasReluEpilogue) {
  Graph f;
  const Node* x = f.in({29, 33}, "x");
  const Node* w = f.in({33, 50}, "w");
  const Node* bias = f.in({50}, "bias");
  const Node* y =
      must(f.b.unary(Op::Relu, must(f.b.binary(Op::Add, must(f.b.matmul(x, w)), bias))));
  const auto xv = values(29 * 33, 7), wv = values(33 * 50, 8), bv = values(50, 9);
  auto out = run_matmul(lower({y}, {x, w, bias}), {xv, wv, bv});
  auto want = ref_matmul(xv, {29, 33}, wv, {33, 50}, y->shape);
  for (size_t e = 0; e < want.size(); ++e) want[e] = std::max(want[e] + bv[e % 50], 0.0);
  if (out.size() == 4) expect_near(out[3], want);
}

TEST(CpuMatmul, ResidualAddAndSecondOutput) {
  Graph f;
  const Node* x = f.in({2, 17, 21}, "x");
  const Node* w = f.in({21, 26}, "w");
  const Node* res = f.in({2, 17, 26}, "res");
  const Node* mm = must(f.b.matmul(x, w));
  const Node* y = must(f.b.binary(Op::Add, mm, res));
  const auto xv = values(2 * 17 * 21, 10), wv = values(21 * 26, 11), rv = values(2 * 17 * 26, 12);
  auto out = run_matmul(lower({y, mm}, {x, w, res}), {xv, wv, rv});
  const auto plain = ref_matmul(xv, {2, 17, 21}, wv, {21, 26}, mm->shape);
  auto want = plain;
  for (size_t e = 0; e < want.size(); ++e) want[e] += rv[e];
  if (out.size() != 5) return;
  expect_near(out[3], want);
  expect_near(out[4], plain);
}

TEST(CpuMatmul, F16OutputEpilogue) {
  Graph f;
  const Node* a = f.in({9, 12}, "a");
  const Node* b = f.in({12, 18}, "b");
  const Node* y = must(f.b.cast(must(f.b.matmul(a, b)), ir::DType::f16));
  const auto av = values(9 * 12, 13), bv = values(12 * 18, 14);
  auto out = run_matmul(lower({y}, {a, b}), {av, bv});
  if (out.size() == 3) expect_near(out[2], ref_matmul(av, {9, 12}, bv, {12, 18}, y->shape));
}

TEST(CpuMatmul, F64UsesTheGenericEmitter) {
  Graph f;
  const Node* a = f.in({7, 5}, "a", ir::DType::f64);
  const Node* b = f.in({5, 9}, "b", ir::DType::f64);
  const Node* y = must(f.b.matmul(a, b));
  const auto av = values(35, 15), bv = values(45, 16);
  auto out = run_matmul(lower({y}, {a, b}), {av, bv}, /*expect_tiled=*/false);
  if (out.size() == 3) expect_near(out[2], ref_matmul(av, {7, 5}, bv, {5, 9}, y->shape));
}

TEST(CpuMatmulRecognizer, RejectsOtherReductions) {
  Graph f;
  const Node* x = f.in({8, 16}, "x");
  const Node* w = f.in({16, 8}, "w");
  const Node* mm = must(f.b.matmul(x, w));
  // A row sum, a max of products, and a matmul whose result feeds another reduction.
  const Node* row_sum = must(f.b.reduce(Op::Sum, x, std::vector<int64_t>{1}, false));
  const Node* sq = must(f.b.binary(Op::Mul, x, x));
  const Node* max_sq = must(f.b.reduce(Op::ReduceMax, sq, std::vector<int64_t>{1}, false));
  const Node* mm_sum = must(f.b.reduce(Op::Sum, mm, std::vector<int64_t>{1}, false));
  EXPECT_FALSE(cpu::matmul_of(kir::analyze_kernel(lower({row_sum}, {x}))));
  EXPECT_FALSE(cpu::matmul_of(kir::analyze_kernel(lower({max_sq}, {x}))));
  EXPECT_FALSE(cpu::matmul_of(kir::analyze_kernel(lower({mm_sum}, {x, w}))));
  EXPECT_TRUE(cpu::matmul_of(kir::analyze_kernel(lower({mm}, {x, w}))));
}

TEST(CpuMatmulRecognizer, RejectsOperandsReadingTheWrongAxis) {
  // Over one [8, 8] buffer with i = v0, j = v1, k = v2: one factor must read no j and the other
  // no i, whichever order they come in.
  auto arena = std::make_shared<kir::ExprArena>();
  kir::ExprArena& a = *arena;
  auto idx = [&](int32_t r, int32_t c) {
    return a.alu(kir::Alu::Add, ir::DType::i64,
                 {a.alu(kir::Alu::Mul, ir::DType::i64, {a.var(r), a.index(8)}), a.var(c)});
  };
  auto ld = [&](int32_t r, int32_t c) { return a.load(0, ir::DType::f32, idx(r, c)); };
  auto sum = [&](const kir::Expr* x, const kir::Expr* y) {
    return a.reduce(kir::ReduceOp::Sum, ir::DType::f32,
                    a.alu(kir::Alu::Mul, ir::DType::f32, {x, y}), {2}, {8});
  };
  auto kernel = [&](const kir::Expr* v) {
    return make_kernel("k", {in_param(ir::DType::f32, {8, 8}), out_param(ir::DType::f32, {8, 8})},
                       {8, 8}, arena, {{1, idx(0, 1), v}});
  };
  EXPECT_TRUE(cpu::matmul_of(kir::analyze_kernel(kernel(sum(ld(0, 2), ld(1, 2))))));   // a @ a^T
  EXPECT_TRUE(cpu::matmul_of(kir::analyze_kernel(kernel(sum(ld(2, 1), ld(0, 2))))));   // factors swapped
  EXPECT_FALSE(cpu::matmul_of(kir::analyze_kernel(kernel(sum(ld(0, 2), ld(0, 1))))));  // both read i
  EXPECT_FALSE(cpu::matmul_of(kir::analyze_kernel(kernel(sum(ld(1, 2), ld(2, 1))))));  // both read j
}

TEST(CpuMatmulRecognizer, RejectsReductionsTooLongForItsScratch) {
  for (int64_t k : {cpu::kMaxMatmulK, cpu::kMaxMatmulK + 1}) {
    Graph f;
    const Node* a = f.in({2, k}, "a");
    const Node* b = f.in({k, 3}, "b");
    EXPECT_EQ(cpu::matmul_of(kir::analyze_kernel(lower({must(f.b.matmul(a, b))}, {a, b}))).has_value(),
              k <= cpu::kMaxMatmulK);
  }
}

}  // namespace
}  // namespace kiln::codegen::testing
