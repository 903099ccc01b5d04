// GpuSource::loop_iterations, the bound a device with a loop budget per invocation (lavapipe)
// checks, against the loops each strategy writes, counted here from the shapes and the launch
// shape: each time a loop is reached it runs its trips and one more pass that fails its test
// (as Mesa's llvmpipe counts them), nested loops once per iteration of the loops around them.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "codegen/gpu/gpu_source.h"
#include "codegen/spirv/spirv_compiler.h"
#include "tests/autotune/tune_test_kernels.h"
#include "tests/codegen/gpu_test_kernels.h"

namespace kiln::codegen::gpu {
namespace {

constexpr int64_t kMaxGroups = 65535;  // gpu_source.h: groups <= 65535 always

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// A loop of `trips` reached `entries` times.
int64_t loop(int64_t entries, int64_t trips) {
  return entries * (trips + 1);
}

GpuSource source(const kir::Kernel& k, const TuneParams& p, Dialect d = Dialect::glsl) {
  auto src = emit_source(k, p, d);
  EXPECT_TRUE(src.has_value()) << k.name << " " << p.str() << ": "
                               << (src ? "" : src.error().message);
  return src ? *src : GpuSource{};
}

// Both dialects write the same loops (the f64 helpers aside: ErfF64IsCountedPerCall; the
// matmul's constant-trip loops too: TiledMatmul), unless `want_cuda` says CUDA's count.
void expect_bound(const kir::Kernel& k, const TuneParams& p, int64_t groups, int64_t want,
                  std::optional<int64_t> want_cuda = std::nullopt) {
  for (Dialect d : {Dialect::glsl, Dialect::cuda}) {
    const GpuSource src = source(k, p, d);
    EXPECT_EQ(src.launch.groups, groups) << k.name << " " << p.str();
    EXPECT_EQ(src.loop_iterations, d == Dialect::cuda ? want_cuda.value_or(want) : want)
        << k.name << " " << p.str() << "\n"
        << src.text;
  }
}

// A grid-stride loop over `units` from a thread's start below one grid step, `step` units per
// thread and step, in min(ceil(units / step), 65535) groups.
struct Grid {
  int64_t groups, trips;
};
Grid grid(int64_t units, int64_t step) {
  const int64_t groups = std::clamp<int64_t>(ceil_div(units, step), 1, kMaxGroups);
  return {groups, ceil_div(units, groups * step)};
}

TEST(GpuLoopIterations, ElementwiseGridStride) {
  const kir::Kernel k = autotune::testing::elementwise_kernel(5000, 8000);  // 4e7 points
  const int64_t points = 5000 * 8000;
  // One point per thread and step: 65535 groups of 256 go over the points three times.
  const Grid one = grid(points, 256);
  ASSERT_EQ(one.trips, 3);
  expect_bound(k, {.block_size = 256, .items_per_thread = 1, .vector_loads = 1}, one.groups,
               loop(1, one.trips));
  // Four items per step: the item loop runs in each of the steps.
  const Grid four = grid(points, 128 * 4);
  ASSERT_EQ(four.trips, 2);
  expect_bound(k, {.block_size = 128, .items_per_thread = 4, .vector_loads = 1}, four.groups,
               loop(1, four.trips) + loop(four.trips, 4));
  // Four lanes per thread: a quarter as many units.
  const Grid lanes = grid(points / 4, 256);
  expect_bound(k, {.block_size = 256, .items_per_thread = 1, .vector_loads = 4}, lanes.groups,
               loop(1, lanes.trips));
}

// out = erf(x) + erf(y) in f64: GLSL has no double erf, and kiln's helper loops over a series of
// at most 59 terms; it is inlined at each of the two calls, each point.
TEST(GpuLoopIterations, ErfF64IsCountedPerCall) {
  auto a = std::make_shared<kir::ExprArena>();
  const kir::Expr* i = a->var(0);
  const kir::Expr* x = a->load(0, DType::f64, i);
  const kir::Expr* y = a->load(1, DType::f64, i);
  const kir::Expr* v = a->alu(
      Alu::Add, DType::f64, {a->alu(Alu::Erf, DType::f64, {x}), a->alu(Alu::Erf, DType::f64, {y})});
  const kir::Kernel k =
      kiln::testing::make_kernel("erf64",
                                 {autotune::testing::param(DType::f64, {3000}, false, "x"),
                                  autotune::testing::param(DType::f64, {3000}, false, "y"),
                                  autotune::testing::param(DType::f64, {3000}, true, "out")},
                                 {3000}, a, {{2, i, v}});
  const Grid g = grid(3000, 256);  // the heuristic block for 3000 points
  const GpuSource glsl = source(k, {}, Dialect::glsl);
  ASSERT_NE(glsl.text.find("for (int n = 1; n < 60; ++n)"), std::string::npos) << glsl.text;
  EXPECT_EQ(glsl.loop_iterations, loop(1, g.trips) + g.trips * 2 * loop(1, 59));
  EXPECT_EQ(source(k, {}, Dialect::cuda).loop_iterations, loop(1, g.trips));  // CUDA's erf
}

TEST(GpuLoopIterations, ReductionsInTheThread) {
  const TuneParams thread{.block_size = 128, .reduce = GpuReduce::thread};
  // A float sum over 40000 runs in blocks of 2^14 (codegen/sum_blocks.h): three blocks, and
  // 40000 iterations of the inner loop in all, one failed test per block.
  const Grid rows = grid(1000, 128);
  ASSERT_EQ(rows.trips, 1);
  expect_bound(autotune::testing::row_reduce_kernel(1000, 40000), thread, rows.groups,
               loop(1, rows.trips) + loop(1, 3) + 40000 + 3);
  // Ten million points, one per thread: two steps of the grid, a loop over the row's 3
  // elements in each.
  const Grid many = grid(10'000'000, 128);
  ASSERT_EQ(many.trips, 2);
  TuneParams one_lane = thread;
  one_lane.vector_loads = 1;
  expect_bound(autotune::testing::row_reduce_kernel(10'000'000, 3), one_lane, many.groups,
               loop(1, many.trips) + loop(many.trips, 3));
  // Four points per thread (the heuristic's lanes here) fold in one loop: a quarter of the steps.
  const Grid quarter = grid(10'000'000 / 4, 128);
  expect_bound(autotune::testing::row_reduce_kernel(10'000'000, 3), thread, quarter.groups,
               loop(1, quarter.trips) + loop(quarter.trips, 3));
  // A max over two variables: 50 outer iterations, each reaching the inner loop of 300.
  auto a = std::make_shared<kir::ExprArena>();
  const kir::Expr* r = a->var(0);
  const kir::Expr* at =
      a->alu(Alu::Add, DType::i64,
             {a->alu(Alu::Mul, DType::i64, {r, a->index(15000)}),
              a->alu(Alu::Add, DType::i64,
                     {a->alu(Alu::Mul, DType::i64, {a->var(1), a->index(300)}), a->var(2)})});
  const kir::Expr* m =
      a->reduce(ReduceOp::Max, DType::f32, a->load(0, DType::f32, at), {1, 2}, {50, 300});
  const kir::Kernel nested =
      kiln::testing::make_kernel("max2",
                                 {autotune::testing::param(DType::f32, {100 * 15000}, false, "x"),
                                  autotune::testing::param(DType::f32, {100}, true, "out")},
                                 {100}, a, {{1, r, m}});
  const Grid few = grid(100, 128);
  expect_bound(nested, thread, few.groups, loop(1, few.trips) + loop(1, 50) + loop(50, 300));
}

// A workgroup of 256 per row: its threads fold a strided share, a tree of log2(256) = 8 steps
// combines the shares (a loop written on one line); split rows gather their parts in the last
// group to finish and combine them with a second tree.
// A group's partials combine in GLSL by a tree in shared memory (log2 256 = 8 steps), in CUDA
// by shuffles within each warp (5 steps) and a fold over the 8 warps' results (7).
TEST(GpuLoopIterations, RowReduceInWorkgroups) {
  const int64_t tree = loop(1, 8), warps = loop(1, 5) + loop(1, 7);
  const kir::Kernel split = autotune::testing::row_reduce_kernel(2, 1 << 20);
  // 2 rows x 4 parts: each thread folds every 1024th element of its part's row.
  const int64_t split_loops = loop(1, 1) + loop(1, (1 << 20) / 1024) + loop(1, ceil_div(4, 256));
  expect_bound(split, {.splits = 4}, 8, split_loops + 2 * tree, split_loops + 2 * warps);
  // One group per row: a thread's 2^23 / 256 = 32768 terms run in two blocks of 2^14.
  const kir::Kernel whole = autotune::testing::row_reduce_kernel(2, 1 << 23);
  const int64_t whole_loops = loop(1, 1) + loop(1, 2) + 32768 + 2;
  expect_bound(whole, {.splits = 1}, 2, whole_loops + tree, whole_loops + warps);
}

// A T x T tile per group and step of the tile loop, 16-deep slices of K. The loops of constant
// trips around them (per slice two staging loops of R = T / 16 and the products' 16 x R x R, three
// nested loops; per tile the accumulators' zeroing and stores, R * R each) are loops in CUDA, and
// written out unrolled in GLSL, where only the loops over tiles and slices count.
int64_t matmul_bound_cuda(int64_t tile_trips, int64_t k_extent, int64_t r) {
  const int64_t slices = ceil_div(k_extent, 16);
  const int64_t per_slice = 2 * loop(1, r) + loop(1, 16) + loop(16, r) + loop(16 * r, r);
  const int64_t per_tile = loop(1, r * r) + loop(1, slices) + slices * per_slice + loop(1, r * r);
  return loop(1, tile_trips) + tile_trips * per_tile;
}

int64_t matmul_bound_glsl(int64_t tile_trips, int64_t k_extent) {
  return loop(1, tile_trips) + loop(tile_trips, ceil_div(k_extent, 16));
}

void expect_matmul_bound(const kir::Kernel& k, int tile, int64_t groups, int64_t tile_trips,
                         int64_t k_extent) {
  const TuneParams p{.tile = tile};
  const GpuSource glsl = source(k, p, Dialect::glsl), cuda = source(k, p, Dialect::cuda);
  EXPECT_EQ(glsl.launch.groups, groups) << k.name << " " << p.str();
  EXPECT_EQ(cuda.launch.groups, groups) << k.name << " " << p.str();
  EXPECT_EQ(glsl.loop_iterations, matmul_bound_glsl(tile_trips, k_extent))
      << k.name << " " << p.str() << "\n"
      << glsl.text;
  EXPECT_EQ(cuda.loop_iterations, matmul_bound_cuda(tile_trips, k_extent, tile / 16))
      << k.name << " " << p.str() << "\n"
      << cuda.text;
}

TEST(GpuLoopIterations, TiledMatmul) {
  // 200 x 300 outputs in 4 x 5 tiles of 64, K = 100.
  expect_matmul_bound(autotune::testing::matmul_kernel(200, 300, 100), 64, 20, 1, 100);
  // 20 batches of 64 x 64 tiles of 16: 81920 tiles, two per group.
  const int64_t tiles = 20 * 64 * 64;
  const Grid g = grid(tiles, 1);
  ASSERT_EQ(g.trips, 2);
  expect_matmul_bound(matmul_kernel(20, 1024, 1024, 32), 16, g.groups, 2, 32);
  // K = 40000 in one tile of 128: 2500 slices, far within lavapipe's 65535 in GLSL.
  expect_matmul_bound(autotune::testing::matmul_kernel(128, 128, 40000), 128, 1, 1, 40000);
}

// In GLSL the tile and slice loops are the only loops of a matmul, in the source and in the
// SPIR-V that shaderc makes of it (one OpLoopMerge per loop), optimized or not: the constant-trip
// loops are written out, not left to a driver to unroll.
TEST(GpuLoopIterations, TiledMatmulSpirvHasOnlyTheTileAndSliceLoops) {
  auto count = [](const std::string& text, const std::string& what) {
    int64_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  // A cast as the loads' prologue, bias and relu as the stores' epilogue: written out per staged
  // element and per output.
  const kir::Kernel k = matmul_kernel(2, 200, 300, 1000);
  for (int tile : {16, 32, 64, 128}) {
    const GpuSource src = source(k, {.tile = tile}, Dialect::glsl);
    EXPECT_EQ(count(src.text, "for ("), 2) << tile << "\n" << src.text;
    EXPECT_EQ(count(src.text, "while ("), 0) << tile;
    for (bool optimize : {false, true}) {
      auto words = spirv::compile_glsl(src.text, k.name, optimize);
      ASSERT_TRUE(words.has_value()) << words.error().message;
      auto dis = spirv::disassemble(*words);
      ASSERT_TRUE(dis.has_value()) << dis.error().message;
      EXPECT_EQ(count(*dis, "OpLoopMerge"), 2) << tile << (optimize ? " optimized" : "");
    }
  }
  // CUDA keeps them as loops, unrolled by nvcc: 2 + the staging loops (2), kk, r, c, and the
  // accumulators' zeroing and stores.
  const GpuSource cuda = source(k, {.tile = 64}, Dialect::cuda);
  EXPECT_EQ(count(cuda.text, "for ("), 2 + 2 + 3 + 2) << cuda.text;
  EXPECT_EQ(count(cuda.text, "#pragma unroll"), 2 + 3 + 1) << cuda.text;
}

}  // namespace
}  // namespace kiln::codegen::gpu
