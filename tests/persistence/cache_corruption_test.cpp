// The cache-corruption suite: a cache filled by real runs (plans, kernels' object code and
// metadata), damaged one way per seed, then read by a new executor. Every run must give the
// result of a run without a cache: a damaged cache costs a rebuild, never a signal or a wrong
// value. Damage: bit and byte flips inside plan records, kernel metadata and object code (the
// entry's seal unchanged, as a bad disk would leave it); flips anywhere in the file; truncation
// at page and sub-page offsets; zeroed pages, at a small size and over 64 MiB (where the startup
// check is skipped). KILN_CORRUPTION_CASES sets the number of damaged files (.ci/run asks for
// more than the default run).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "ir/builder.h"
#include "runtime/executor.h"
#include "tests/support/must.h"

namespace kiln::runtime {
namespace {

namespace fs = std::filesystem;
using ir::DType;

using kiln::tests::must;

// The graphs whose plans and kernels fill the cache: the reproducer (add over f32[4]), a
// softmax (reductions), and a matmul with an epilogue (the matmul code path).
struct Workload {
  ir::Graph g;
  ir::Builder b{g};
  std::vector<const ir::Node*> inputs, outputs;
};

std::vector<std::unique_ptr<Workload>> workloads() {
  std::vector<std::unique_ptr<Workload>> out;
  {
    auto w = std::make_unique<Workload>();
    const ir::Node* x = w->g.input(DType::f32, {4}, "x");
    w->inputs = {x};
    w->outputs = {must(w->b.binary(ir::Op::Add, x, must(w->b.scalar(1.0, DType::f32))))};
    out.push_back(std::move(w));
  }
  {
    auto w = std::make_unique<Workload>();
    const ir::Node* x = w->g.input(DType::f32, {16, 64}, "x");
    w->inputs = {x};
    w->outputs = {must(w->b.softmax(x, 1))};
    out.push_back(std::move(w));
  }
  {
    auto w = std::make_unique<Workload>();
    const ir::Node* a = w->g.input(DType::f32, {24, 40}, "a");
    const ir::Node* m = w->g.input(DType::f32, {40, 32}, "m");
    w->inputs = {a, m};
    const ir::Node* p = must(w->b.matmul(a, m));
    w->outputs = {must(w->b.unary(ir::Op::Relu, must(w->b.binary(ir::Op::Add, p, must(w->b.scalar(0.25, DType::f32))))))};
    out.push_back(std::move(w));
  }
  return out;
}

std::unique_ptr<Executor> executor(const std::string& cache) {
  DeviceOptions o;
  o.cpu_rates = RatesSource::reference;
  o.cache_path = cache;
  o.num_threads = 2;  // the same reduction order in every run, whatever the machine
  auto d = open_executor("cpu", o);
  KILN_CHECK(d.has_value()) << d.error().message;
  return std::move(*d);
}

// Each workload's outputs as bytes, run on `dev`; an error says which workload failed and why.
Expected<std::vector<std::vector<std::byte>>> run_all(Executor& dev,
                                                      std::vector<std::unique_ptr<Workload>>& ws) {
  std::vector<std::vector<std::byte>> results;
  for (size_t i = 0; i < ws.size(); ++i) {
    Workload& w = *ws[i];
    Bindings b;
    for (const ir::Node* in : w.inputs) {
      ir::HostTensor t = ir::HostTensor::zeros(in->dtype, in->shape);
      for (int64_t e = 0; e < t.numel(); ++e) t.set(e, std::sin(0.37 * static_cast<double>(e + 11 * i)));
      b[in] = dev.pool()->from_host(t).value();
    }
    auto out = dev.execute(w.g, w.outputs, b, nullptr);
    if (!out) return make_error(fmt::format("workload {}: {}", i, out.error().message));
    for (const auto& buffer : *out) results.push_back(buffer->to_host().bytes);
  }
  return results;
}

int cases() {
  const char* n = std::getenv("KILN_CORRUPTION_CASES");
  return n ? std::max(1, std::atoi(n)) : 120;
}

class CacheCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kiln_corrupt_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ws_ = workloads();
    auto expected = run_all(*executor(""), ws_);
    ASSERT_TRUE(expected.has_value()) << expected.error().message;
    expected_ = std::move(*expected);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A cache filled by running every workload (closed, so that it is one file without a WAL);
  // `pad` first stores an entry of that many bytes, so that the file passes 64 MiB.
  std::string pristine(int64_t pad) {
    const std::string file = (dir_ / (pad ? "pristine_large.sqlite" : "pristine.sqlite")).string();
    if (pad) {
      auto store = cache::Store::open(file);
      KILN_CHECK(store.has_value());
      cache::Entry e;
      e.value.assign(static_cast<size_t>(pad), std::uint8_t{0x70});
      KILN_CHECK((*store)->put(cache::Table::autotune, cache::KeyParts{{{"pad", "padding"}}}, e));
    }
    {
      auto dev = executor(file);
      auto filled = run_all(*dev, ws_);
      KILN_CHECK(filled.has_value()) << filled.error().message;
    }
    KILN_CHECK(!fs::exists(file + "-wal")) << "the pristine cache still has a WAL";
    return file;
  }

  // Runs every workload on a new executor over `file`: the results must be those without a cache.
  void expect_reference_results(const std::string& file, const std::string& damage) {
    auto dev = executor(file);
    auto got = run_all(*dev, ws_);
    ASSERT_TRUE(got.has_value()) << damage << ": " << got.error().message;
    ASSERT_EQ(got->size(), expected_.size()) << damage;
    for (size_t i = 0; i < got->size(); ++i)
      EXPECT_TRUE((*got)[i] == expected_[i]) << damage << ": output " << i << " differs";
  }

  fs::path dir_;
  std::vector<std::unique_ptr<Workload>> ws_;
  std::vector<std::vector<std::byte>> expected_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// One entry's column changed in place through SQLite (its seal left as it was): a flipped bit
// or byte in a plan record, a kernel's object code or its metadata.
std::string damage_entry(const std::string& file, std::mt19937_64& rng) {
  sqlite3* db = nullptr;
  KILN_CHECK(sqlite3_open(file.c_str(), &db) == SQLITE_OK);
  static const char* kTargets[][2] = {{"plans", "value"}, {"kernels", "value"}, {"kernels", "metadata"}};
  const auto& [table, column] = kTargets[rng() % 3];
  std::vector<std::pair<std::string, std::string>> rows;  // key, contents
  {
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, fmt::format("SELECT key, {} FROM {}", column, table).c_str(), -1, &st, nullptr);
    while (sqlite3_step(st) == SQLITE_ROW) {
      const auto* p = static_cast<const char*>(sqlite3_column_blob(st, 1));
      rows.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)),
                        std::string(p, p + sqlite3_column_bytes(st, 1)));
    }
    sqlite3_finalize(st);
  }
  KILN_CHECK(!rows.empty()) << table;
  auto& [key, contents] = rows[rng() % rows.size()];
  KILN_CHECK(!contents.empty());
  const size_t at = rng() % contents.size();
  const bool bit = rng() % 2;
  contents[at] = static_cast<char>(contents[at] ^ (bit ? 1 << (rng() % 8) : 1 + rng() % 255));
  sqlite3_stmt* up = nullptr;
  sqlite3_prepare_v2(db, fmt::format("UPDATE {} SET {} = ? WHERE key = ?", table, column).c_str(), -1, &up,
                     nullptr);
  if (std::string(column) == "value")
    sqlite3_bind_blob(up, 1, contents.data(), static_cast<int>(contents.size()), SQLITE_TRANSIENT);
  else
    sqlite3_bind_text(up, 1, contents.data(), static_cast<int>(contents.size()), SQLITE_TRANSIENT);
  sqlite3_bind_text(up, 2, key.c_str(), -1, SQLITE_TRANSIENT);
  KILN_CHECK(sqlite3_step(up) == SQLITE_DONE) << sqlite3_errmsg(db);
  sqlite3_finalize(up);
  sqlite3_close(db);
  return fmt::format("{} {} of {} {}: {} at byte {}", bit ? "bit" : "byte", "flip", table, column,
                     key, at);
}

// Damage to the file's bytes: flips anywhere, truncation at a page or inside one, a zeroed page
// (of the last `tail_pages`, where a large file keeps the run's entries, or anywhere).
std::string damage_file(const std::string& file, std::mt19937_64& rng, int kind, int64_t tail_pages) {
  std::string bytes = read_file(file);
  const int64_t size = static_cast<int64_t>(bytes.size()), pages = size / 4096;
  const auto page_to_damage = [&] {
    const int64_t first = tail_pages > 0 ? std::max<int64_t>(0, pages - tail_pages) : 0;
    return first + static_cast<int64_t>(rng() % static_cast<uint64_t>(pages - first));
  };
  switch (kind) {
    case 0: {
      const int flips = 1 + static_cast<int>(rng() % 8);
      for (int i = 0; i < flips; ++i) bytes[rng() % bytes.size()] ^= static_cast<char>(1 << (rng() % 8));
      write_file(file, bytes);
      return fmt::format("{} bit flips in the file", flips);
    }
    case 1: {
      const int64_t keep = 4096 * (1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(pages - 1)));
      fs::resize_file(file, static_cast<uintmax_t>(keep));
      return fmt::format("truncated at page offset {}", keep);
    }
    case 2: {
      const int64_t keep = size - 1 - static_cast<int64_t>(rng() % static_cast<uint64_t>(std::min<int64_t>(size - 1, 3 * 4096)));
      fs::resize_file(file, static_cast<uintmax_t>(keep));
      return fmt::format("truncated at byte {} of {}", keep, size);
    }
    default: {
      const int64_t page = page_to_damage();
      std::fill(bytes.begin() + page * 4096, bytes.begin() + (page + 1) * 4096, '\0');
      write_file(file, bytes);
      return fmt::format("page {} of {} zeroed", page, pages);
    }
  }
}

TEST_F(CacheCorruption, EveryDamagedCacheGivesTheResultOfARunWithoutOne) {
  const std::string clean = pristine(0);
  const std::string bytes = read_file(clean);
  const std::string file = (dir_ / "case.sqlite").string();
  const int n = cases();
  for (int seed = 0; seed < n; ++seed) {
    std::mt19937_64 rng(static_cast<uint64_t>(seed) * 7919 + 1);
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(file + suffix);
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().starts_with("case.sqlite.corrupt-")) fs::remove(e.path());
    write_file(file, bytes);
    const int kind = seed % 5;
    const std::string damage =
        kind == 4 ? damage_entry(file, rng) : damage_file(file, rng, kind, /*tail_pages=*/0);
    SCOPED_TRACE(fmt::format("seed {}: {}", seed, damage));
    expect_reference_results(file, damage);
    if (HasFatalFailure() || HasNonfatalFailure()) return;  // one report per failing seed
    // The cache the damaged one became serves the next run whole.
    expect_reference_results(file, damage + ", second run");
    if (HasFatalFailure() || HasNonfatalFailure()) return;
  }
  RecordProperty("damaged_files", n);
}

TEST_F(CacheCorruption, ADamagedPageInACacheOver64MiBIsSurvivedToo) {
  const std::string clean = pristine(65 << 20);
  ASSERT_GT(static_cast<int64_t>(fs::file_size(clean)), 64 << 20);
  const std::string file = (dir_ / "case.sqlite").string();
  const int n = std::max(3, cases() / 40);
  for (int seed = 0; seed < n; ++seed) {
    std::mt19937_64 rng(static_cast<uint64_t>(seed) * 104729 + 5);
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().starts_with("case.sqlite")) fs::remove(e.path());
    fs::copy_file(clean, file);
    // The run's entries follow the padding: zero one of the last pages, or flip an entry.
    const std::string damage = seed % 2 ? damage_entry(file, rng) : damage_file(file, rng, 3, /*tail_pages=*/24);
    SCOPED_TRACE(fmt::format("seed {}: {}", seed, damage));
    expect_reference_results(file, damage);
    if (HasFatalFailure() || HasNonfatalFailure()) return;
    expect_reference_results(file, damage + ", second run");
    if (HasFatalFailure() || HasNonfatalFailure()) return;
  }
}

}  // namespace
}  // namespace kiln::runtime
