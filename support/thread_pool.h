// A fixed pool of worker threads that splits a range into chunks.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::support {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs fn(begin, end) over [0, n) in contiguous chunks of at least `min_chunk` (at most
  // kChunksPerThread per thread), which the caller and the workers claim one at a time: a worker
  // that wakes late (a sleeping thread took 30-50 µs to wake on a VM) leaves its chunks to the
  // others instead of holding the job up. Returns when every chunk is done. A kernel whose
  // chunks read longer runs of memory when they are fewer (a matrix-vector product's column
  // stripes) asks for fewer chunks per thread; 0 means kChunksPerThread.
  //
  // With `wake_sleepers` false (a job too small to be worth a wake), workers asleep are left so:
  // the job runs on the workers spinning for work and the caller, or on the caller alone when
  // every worker sleeps. Waking one costs the caller a futex call and the job its late start: a
  // 4 us job (small_ops) between two Google Benchmark repetitions took 7 us on 2 threads, one run
  // in ten 210, against 5 on one.
  void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn,
                    int chunks_per_thread = 0, bool wake_sleepers = true);
  static constexpr int kChunksPerThread = 4;

  // Every core: std::thread::hardware_concurrency() (at least 1). KILN_NUM_THREADS is read at
  // the edge, with the configuration (runtime/config.h), and passed down as a thread count.
  static int default_threads();

 private:
  void worker_loop();
  // Claims and runs chunks of the job of generation `gen` until none is left (or a newer job has
  // replaced it).
  void run_chunks(uint32_t gen, const std::function<void(int64_t, int64_t)>* fn, int64_t n, int chunks);

  std::vector<std::thread> workers_;
  // Workers and the caller spin briefly (kSpin) on generation_ / done_chunks_ before sleeping on the
  // condition variables: back-to-back kernels (life: 100 steps) then skip a futex round trip each.
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;  // written before generation_
  int64_t job_n_ = 0;
  int job_chunks_ = 0;
  std::atomic<uint64_t> generation_ = 0;
  // The job's generation (high 32 bits) and its next unclaimed chunk (low 32 bits): a claim is a
  // compare-exchange that fails once a newer job is posted, so a worker holding an old job's
  // function never runs it after its caller returned.
  std::atomic<uint64_t> claim_ = 0;
  std::atomic<int> done_chunks_ = 0;
  std::atomic<bool> stop_ = false;
  std::atomic<int> sleeping_ = 0;  // workers waiting on wake_
  std::mutex run_mu_;  // one parallel_for at a time
};

}  // namespace kiln::support
