// ThreadPool: a generation counter wakes the workers; each takes its own static chunk.
#include "support/thread_pool.h"

#include <chrono>
#include <cstdlib>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln::support {

namespace {
// How long a thread polls for the next job (or the workers' completion) before it sleeps: long
// enough to bridge the host's work between two realizes of a loop, so that their first kernel
// finds the workers awake. With 50 us, the first of life's 100 kernels (a 512 x 512 step, ~45 us)
// took 62 to 103 us under `kiln dump --measure` (a worker woken from sleep joined late), with
// 200 us 41 to 48, as its 99 siblings.
constexpr auto kSpin = std::chrono::microseconds(200);

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Polls `ready` for up to kSpin; true when it became true.
template <typename Ready>
bool spin_until(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return ready();
  }
}

std::pair<int64_t, int64_t> chunk_range(int64_t n, int chunks, int index) {
  int64_t base = n / chunks, extra = n % chunks;
  int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}
}  // namespace

int ThreadPool::default_threads() {
  unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(uint32_t gen, const std::function<void(int64_t, int64_t)>* fn, int64_t n,
                            int chunks) {
  for (;;) {
    uint64_t c = claim_.load(std::memory_order_acquire);
    do {
      if (static_cast<uint32_t>(c >> 32) != gen || static_cast<int64_t>(c & 0xffffffffu) >= chunks)
        return;
    } while (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel,
                                           std::memory_order_acquire));
    auto [b, e] = chunk_range(n, chunks, static_cast<int>(c & 0xffffffffu));
    if (b < e) (*fn)(b, e);
    if (done_chunks_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
      std::lock_guard lock(mu_);  // the caller checks done_chunks_ under it before sleeping
      done_.notify_one();
    }
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    auto fresh = [&] {
      return stop_.load(std::memory_order_acquire) ||
             generation_.load(std::memory_order_acquire) != seen;
    };
    if (!spin_until(fresh)) {
      std::unique_lock lock(mu_);
      sleeping_.fetch_add(1, std::memory_order_acq_rel);
      wake_.wait(lock, fresh);
      sleeping_.fetch_sub(1, std::memory_order_acq_rel);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n;
    int chunks;
    {
      std::lock_guard lock(mu_);  // the job's fields were written under it
      seen = generation_.load(std::memory_order_acquire);
      job = job_;
      n = job_n_;
      chunks = job_chunks_;
    }
    // A claim succeeds only while this generation's job is posted, and its caller waits for
    // every claimed chunk: *job outlives the chunks run here (and is not touched without one).
    run_chunks(static_cast<uint32_t>(seen), job, n, chunks);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk,
                              const std::function<void(int64_t, int64_t)>& fn, int chunks_per_thread,
                              bool wake_sleepers) {
  if (n <= 0) return;
  if (chunks_per_thread <= 0) chunks_per_thread = kChunksPerThread;
  int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  int chunks = static_cast<int>(std::min<int64_t>(int64_t{size()} * chunks_per_thread, max_chunks));
  if (chunks <= 1 || workers_.empty() ||
      (!wake_sleepers &&
       sleeping_.load(std::memory_order_acquire) == static_cast<int>(workers_.size()))) {
    fn(0, n);
    return;
  }
  std::lock_guard run_lock(run_mu_);
  uint32_t gen;
  {
    std::lock_guard lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    done_chunks_.store(0, std::memory_order_relaxed);
    gen = static_cast<uint32_t>(generation_.fetch_add(1, std::memory_order_acq_rel) + 1);
    claim_.store(uint64_t{gen} << 32, std::memory_order_release);
  }
  if (wake_sleepers) wake_.notify_all();
  run_chunks(gen, &fn, n, chunks);
  auto finished = [&] { return done_chunks_.load(std::memory_order_acquire) == chunks; };
  if (spin_until(finished)) return;
  std::unique_lock lock(mu_);
  done_.wait(lock, finished);
}

}  // namespace kiln::support
