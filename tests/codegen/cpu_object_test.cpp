// Object code of cpu kernels (the persistent cache's payload): compiled kernels' objects loaded
// into an independent backend and the same one run byte-identically (vector math, libm calls,
// reductions, tiled matmul with malloc), repeated and clashing loads, bad bytes, and load speed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/cpu/matmul_recognizer.h"
#include "ir/builder.h"
#include "passes/lower.h"
#include "tests/codegen/cpu_test_support.h"

namespace kiln::codegen::testing {
namespace {

using kir::Alu;

// A backend of its own: its own LLJIT, JITDylibs and symbol serials, as in another process.
std::unique_ptr<CpuBackend> fresh_backend() {
  auto created = CpuBackend::create();
  KILN_CHECK(created.has_value()) << created.error().message;
  return std::move(*created);
}

// out[i] = f(a[i]) * b[i] + 1 over [n].
kir::Kernel elementwise(DType t, int64_t n, Alu f, std::string name = "ew") {
  auto a = std::make_shared<kir::ExprArena>();
  const kir::Expr* i = a->var(0);
  const kir::Expr* x = a->alu(f, t, {a->load(0, t, i)});
  const kir::Expr* y = a->alu(Alu::Mul, t, {x, a->load(1, t, i)});
  const kir::Expr* z = a->alu(Alu::Add, t, {y, a->constant(t, 1)});
  return make_kernel(std::move(name), {in_param(t, {n}), in_param(t, {n}), out_param(t, {n})}, {n},
                     a, {{2, i, z}});
}

// out[r] = sum_c x[r, c] * x[r, c] over [rows, cols] f32.
kir::Kernel sum_of_squares(int64_t rows, int64_t cols) {
  auto a = std::make_shared<kir::ExprArena>();
  const kir::Expr* idx = a->alu(
      Alu::Add, DType::i64, {a->alu(Alu::Mul, DType::i64, {a->var(0), a->index(cols)}), a->var(1)});
  const kir::Expr* x = a->load(0, DType::f32, idx);
  const kir::Expr* r =
      a->reduce(kir::ReduceOp::Sum, DType::f32, a->alu(Alu::Mul, DType::f32, {x, x}), {1}, {cols});
  return make_kernel("sumsq", {in_param(DType::f32, {rows, cols}), out_param(DType::f32, {rows})},
                     {rows}, a, {{1, a->var(0), r}});
}

// C = A @ B lowered like the runtime does (and like cpu_matmul_test): the tiled emitter's kind.
kir::Kernel matmul(int64_t m, int64_t k, int64_t n) {
  ir::Graph g;
  ir::Builder b{g};
  const ir::Node* a = g.input(DType::f32, {m, k}, "a");
  const ir::Node* bm = g.input(DType::f32, {k, n}, "b");
  auto y = b.matmul(a, bm);
  KILN_CHECK(y.has_value()) << y.error().message;
  passes::FusedGroup group;
  for (const ir::Node* node : ir::topo_order({*y}))
    if (node != a && node != bm) group.nodes.push_back(node);
  group.outputs = {*y};
  group.inputs = {a, bm};
  auto lowered = passes::lower_group(group, "mm");
  KILN_CHECK(lowered.has_value()) << lowered.error().message;
  return std::move(lowered->kernel);
}

// Inputs of `k` with distinct, sign-mixed values (NaN-free, in every op's domain: |x| <= 2).
std::vector<Buffer> inputs_for(const kir::Kernel& k) {
  std::vector<Buffer> bufs;
  for (size_t p = 0; p < k.params.size(); ++p) {
    const size_t n = static_cast<size_t>(ir::shape_numel(k.params[p].shape));
    Buffer b(k.params[p].dtype, n);
    if (!k.params[p].output)
      for (size_t i = 0; i < n; ++i) b.set(i, static_cast<double>((i * 7 + p * 3) % 33) / 8 - 2);
    bufs.push_back(std::move(b));
  }
  return bufs;
}

// Runs `art` over its whole outer extent and returns every buffer's bytes.
std::vector<Buffer> run(const CpuArtifact& art, std::vector<Buffer> bufs) {
  std::vector<void*> ptrs;
  for (Buffer& b : bufs) ptrs.push_back(b.bytes.data());
  art.fn(ptrs.data(), 0, art.outer_extent);
  return bufs;
}

std::shared_ptr<const CpuArtifact> must(Expected<std::shared_ptr<const CpuArtifact>> art) {
  KILN_CHECK(art.has_value()) << art.error().message;
  return std::move(*art);
}

// Compiles `k` in the shared backend, loads its object into `other` and into the same backend,
// and checks that all three produce the same bytes (and that the output was written at all).
void expect_loaded_runs_like_compiled(const kir::Kernel& k, CpuBackend& other) {
  SCOPED_TRACE(k.name);
  auto compiled = backend().compile(k, {});
  ASSERT_TRUE(compiled.has_value()) << compiled.error().message;
  const CpuArtifact& c = **compiled;
  ASSERT_FALSE(c.object.empty());
  auto elsewhere = other.load(c.object, c.symbol, c.outer_extent);
  ASSERT_TRUE(elsewhere.has_value()) << elsewhere.error().message;
  auto here = backend().load(c.object, c.symbol, c.outer_extent);
  ASSERT_TRUE(here.has_value()) << here.error().message;
  EXPECT_NE((*elsewhere)->fn, c.fn);
  EXPECT_NE((*here)->fn, c.fn);
  EXPECT_EQ((*here)->symbol, c.symbol);
  EXPECT_EQ((*here)->outer_extent, c.outer_extent);
  EXPECT_TRUE((*here)->llvm_ir.empty());  // nothing of LLVM's IR ran

  const std::vector<Buffer> in = inputs_for(k);
  const std::vector<Buffer> want = run(c, in);
  EXPECT_NE(want.back().bytes, in.back().bytes) << "the kernel wrote nothing";
  for (const auto& art : {*elsewhere, *here}) {
    const std::vector<Buffer> got = run(*art, in);
    for (size_t p = 0; p < got.size(); ++p)
      EXPECT_EQ(got[p].bytes, want[p].bytes) << "parameter %" << p;
  }
}

TEST(CpuObject, LoadedKernelsRunLikeCompiledOnes) {
  std::unique_ptr<CpuBackend> other = fresh_backend();
  for (Alu f : {Alu::Exp, Alu::Tanh, Alu::Gelu, Alu::Erf, Alu::Sin, Alu::Log})
    expect_loaded_runs_like_compiled(elementwise(DType::f32, 1003, f), *other);
  expect_loaded_runs_like_compiled(sum_of_squares(37, 301), *other);
}

// f64 tanh is a libm call: the loaded object must resolve it against the process.
TEST(CpuObject, LibmCallsResolveWhenLoading) {
  const kir::Kernel k = elementwise(DType::f64, 257, Alu::Tanh, "ew64");
  auto compiled = must(backend().compile(k, {}));
  ASSERT_NE(compiled->llvm_ir.find("@tanh("), std::string::npos) << compiled->llvm_ir;
  std::unique_ptr<CpuBackend> other = fresh_backend();
  expect_loaded_runs_like_compiled(k, *other);
}

// The tiled matmul mallocs and frees its B panel, which the loaded object must resolve too.
TEST(CpuObject, TiledMatmulLoads) {
  std::unique_ptr<CpuBackend> other = fresh_backend();
  for (auto [m, k, n] : {std::tuple{37, 29, 53}, std::tuple{130, 300, 97}}) {
    const kir::Kernel kernel = matmul(m, k, n);
    ASSERT_TRUE(cpu::matmul_of(kir::analyze_kernel(kernel)).has_value()) << kir::print_kernel(kernel);
    auto compiled = must(backend().compile(kernel, {}));
    ASSERT_NE(compiled->llvm_ir.find("@malloc"), std::string::npos);
    expect_loaded_runs_like_compiled(kernel, *other);
  }
}

TEST(CpuObject, SameObjectLoadsTwiceIntoOneBackend) {
  const kir::Kernel k = elementwise(DType::f32, 100, Alu::Exp);
  auto compiled = must(backend().compile(k, {}));
  std::unique_ptr<CpuBackend> other = fresh_backend();
  auto first = must(other->load(compiled->object, compiled->symbol, compiled->outer_extent));
  auto second = must(other->load(compiled->object, compiled->symbol, compiled->outer_extent));
  EXPECT_NE(first->fn, second->fn);
  const std::vector<Buffer> in = inputs_for(k);
  EXPECT_EQ(run(*first, in).back().bytes, run(*compiled, in).back().bytes);
  EXPECT_EQ(run(*second, in).back().bytes, run(*compiled, in).back().bytes);
}

// Kernels of one name get one symbol ("kiln_clash") in every backend: loading one's object next to
// the other's compiled kernel of that symbol must keep both, each computing its own function.
TEST(CpuObject, LoadNextToACompiledKernelOfTheSameSymbol) {
  std::unique_ptr<CpuBackend> a = fresh_backend(), b = fresh_backend();
  const kir::Kernel ka = elementwise(DType::f32, 64, Alu::Exp, "clash");
  const kir::Kernel kb = elementwise(DType::f32, 64, Alu::Neg, "clash");
  auto from_a = must(a->compile(ka, {}));
  auto in_b = must(b->compile(kb, {}));
  ASSERT_EQ(from_a->symbol, in_b->symbol);
  auto loaded = must(b->load(from_a->object, from_a->symbol, from_a->outer_extent));
  auto in_b_again = must(b->compile(kb, {}));  // compiling after the load still works

  const std::vector<Buffer> in = inputs_for(ka);
  const auto want_a = run(*from_a, in).back().bytes, want_b = run(*in_b, in).back().bytes;
  ASSERT_NE(want_a, want_b);
  EXPECT_EQ(run(*loaded, in).back().bytes, want_a);
  EXPECT_EQ(run(*in_b, in).back().bytes, want_b);
  EXPECT_EQ(run(*in_b_again, in).back().bytes, want_b);
}

TEST(CpuObject, BadBytesAreErrors) {
  const kir::Kernel k = elementwise(DType::f32, 100, Alu::Tanh);
  auto compiled = must(backend().compile(k, {}));
  const std::vector<uint8_t>& good = compiled->object;
  std::unique_ptr<CpuBackend> other = fresh_backend();
  auto expect_error = [&](const std::vector<uint8_t>& bytes, const std::string& symbol,
                          const std::string& case_name) {
    auto art = other->load(bytes, symbol, compiled->outer_extent);
    ASSERT_FALSE(art.has_value()) << case_name << " loaded";
    EXPECT_NE(art.error().message.find(symbol), std::string::npos)
        << case_name << ": " << art.error().message;
  };
  expect_error({}, compiled->symbol, "empty");
  std::vector<uint8_t> garbage(good.size());
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>(i * 131 + 7);
  expect_error(garbage, compiled->symbol, "garbage");
  std::vector<uint8_t> elf_garbage = garbage;  // right magic, nonsense header
  std::copy_n(good.begin(), 16, elf_garbage.begin());
  expect_error(elf_garbage, compiled->symbol, "ELF magic then garbage");
  for (size_t len : {size_t{1}, size_t{4}, size_t{16}, size_t{63}, good.size() / 2,
                     good.size() - 64, good.size() - 1}) {
    expect_error(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<ptrdiff_t>(len)),
                 compiled->symbol, "truncated to " + std::to_string(len));
  }
  expect_error(good, "kiln_not_in_this_object", "wrong symbol");
  // The failed loads left the backend usable.
  auto art = must(other->load(good, compiled->symbol, compiled->outer_extent));
  const std::vector<Buffer> in = inputs_for(k);
  EXPECT_EQ(run(*art, in).back().bytes, run(*compiled, in).back().bytes);
}

TEST(CpuObject, LoadIsMuchFasterThanCompile) {
  const kir::Kernel k = matmul(64, 64, 64);
  std::unique_ptr<CpuBackend> compiler = fresh_backend(), loader = fresh_backend();
  auto compiled = must(compiler->compile(k, {}));
  auto loaded = must(loader->load(compiled->object, compiled->symbol, compiled->outer_extent));
  const auto start = std::chrono::steady_clock::now();
  auto again = must(loader->load(compiled->object, compiled->symbol, compiled->outer_extent));
  const double measured =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LE(again->compile_ms, measured);
  std::printf(
      "tiled matmul 64^3: compile %.2f ms, first load %.3f ms, second load %.3f ms, "
      "object %zu bytes\n",
      compiled->compile_ms, loaded->compile_ms, again->compile_ms, compiled->object.size());
  RecordProperty("compile_ms", std::to_string(compiled->compile_ms));
  RecordProperty("load_ms", std::to_string(loaded->compile_ms));
}

TEST(CpuObject, VersionsForCacheKeys) {
  const std::string v = backend().llvm_version();
  EXPECT_EQ(v.substr(0, 3), "19.") << v;
  EXPECT_EQ(v, fresh_backend()->llvm_version());
  EXPECT_STRNE(CpuBackend::kCodegenVersion, "");
}

// The lines of perf's map of this process that name `symbol`: {start, size}.
std::vector<std::pair<uint64_t, uint64_t>> perf_map_lines(const std::string& symbol) {
  std::vector<std::pair<uint64_t, uint64_t>> lines;
  std::ifstream in(perf_map_path());
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long start = 0, size = 0;
    char name[256] = {};
    if (std::sscanf(line.c_str(), "%llx %llx %255s", &start, &size, name) == 3 && symbol == name)
      lines.emplace_back(start, size);
  }
  return lines;
}

// With KILN_PERF_MAP=1 every kernel linked, compiled or loaded, names its code in perf's map: a
// line starts at its entry point and spans its function. Without it nothing is added.
TEST(CpuObject, PerfMapNamesEveryLinkedKernelWhenAsked) {
  const std::string path = perf_map_path();
  EXPECT_EQ(path, "/tmp/perf-" + std::to_string(::getpid()) + ".map");
  const bool existed = std::ifstream(path).good();
  std::optional<std::string> was;
  if (const char* v = std::getenv("KILN_PERF_MAP")) was = v;
  std::unique_ptr<CpuBackend> own = fresh_backend();
  const kir::Kernel off = elementwise(DType::f32, 515, Alu::Exp, "perf_map_off");
  {
    ::unsetenv("KILN_PERF_MAP");
    auto compiled = must(own->compile(off, {}));
    EXPECT_TRUE(perf_map_lines(compiled->symbol).empty());
  }
  ::setenv("KILN_PERF_MAP", "1", 1);
  const kir::Kernel k = sum_of_squares(19, 77);
  auto compiled = own->compile(k, {});
  std::unique_ptr<CpuBackend> other = fresh_backend();
  Expected<std::shared_ptr<const CpuArtifact>> loaded = make_error("not compiled");
  if (compiled)
    loaded = other->load((*compiled)->object, (*compiled)->symbol, (*compiled)->outer_extent);
  if (was)
    ::setenv("KILN_PERF_MAP", was->c_str(), 1);
  else
    ::unsetenv("KILN_PERF_MAP");
  ASSERT_TRUE(compiled.has_value()) << compiled.error().message;
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  const auto lines = perf_map_lines((*compiled)->symbol);
  ASSERT_EQ(lines.size(), 2u) << "one line for the compiled kernel, one for the loaded one";
  for (const CpuArtifact* art : {compiled->get(), loaded->get()}) {
    const auto at = reinterpret_cast<uint64_t>(art->fn);
    EXPECT_TRUE(std::ranges::any_of(
        lines,
        [&](const auto& l) { return l.first == at && l.second > 16 && l.second < (1u << 20); }))
        << "no line starts at " << std::hex << at;
  }
  if (!existed) std::remove(path.c_str());
}

}  // namespace
}  // namespace kiln::codegen::testing
