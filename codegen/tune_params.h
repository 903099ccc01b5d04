// TuneParams: how a kernel runs (the schedule), handed to codegen; never part of the kernel IR.
// The cpu backend reads vector_width, unroll and stores; the GPU emitter (codegen/gpu) reads the
// rest.
// Zero always means "the backend's heuristic choice".
#pragma once

#include <cstdint>
#include <string>

namespace kiln::codegen {

// How a GPU kernel computes its row reductions.
enum class GpuReduce : uint8_t {
  heuristic = 0,
  workgroup = 1,  // a workgroup per row, each reduction strided over it and combined in a tree
  thread = 2,     // one thread per point, each reduction a loop inside the thread
};

// How a cpu kernel writes its large outputs (codegen/cpu/streaming_stores.h).
enum class CpuStores : uint8_t {
  heuristic = 0,  // streaming_stores.h's rule, from the outputs' sizes and the last-level cache
  cached = 1,     // ordinary stores everywhere
  streaming = 2,  // non-temporal stores into every written-only output of kStreamingMinBytes
};

struct TuneParams {
  // cpu
  int vector_width = 0;  // SIMD lanes for the innermost loop
  int unroll = 0;        // interleave/unroll factor
  CpuStores stores = CpuStores::heuristic;
  // gpu
  int block_size = 0;        // threads per workgroup (CUDA block); a power of two in [32, 1024]
  int items_per_thread = 0;  // elementwise: points each thread handles per grid step (1, 2, 4, 8)
  GpuReduce reduce = GpuReduce::heuristic;
  int tile = 0;              // tiled matmul: the output tile's side (16, 32, 64 or 128); attention
                             // (cpu too): query rows per block (16, 32, 64 or 128)
  int vector_loads = 0;      // elementwise: 1 = scalar accesses, 4 = four points per thread with
                             // 16-byte loads and stores where the access is contiguous and aligned
  int splits = 0;            // row reduction: workgroups sharing each row (1, 2, 4, ... 256); the
                             // last one to finish combines their partial results

  bool operator==(const TuneParams&) const = default;
  bool has_gpu_fields() const {
    return block_size != 0 || items_per_thread != 0 || reduce != GpuReduce::heuristic || tile != 0 ||
           vector_loads != 0 || splits != 0;
  }
  // "vector_width=8 unroll=2" (the cpu fields, stores only when set: "... stores=cached"; also
  // the text of the all-default params) or the GPU fields that are set, e.g. "block_size=128
  // items_per_thread=4". Part of cache keys.
  std::string str() const {
    const std::string cpu = "vector_width=" + std::to_string(vector_width) +
                            " unroll=" + std::to_string(unroll) +
                            (stores == CpuStores::heuristic ? ""
                             : stores == CpuStores::cached  ? " stores=cached"
                                                            : " stores=streaming");
    if (!has_gpu_fields()) return cpu;
    std::string s;
    const auto add = [&](const std::string& field) { s += (s.empty() ? "" : " ") + field; };
    if (vector_width != 0 || unroll != 0 || stores != CpuStores::heuristic) add(cpu);
    if (block_size != 0) add("block_size=" + std::to_string(block_size));
    if (items_per_thread != 0) add("items_per_thread=" + std::to_string(items_per_thread));
    if (reduce != GpuReduce::heuristic)
      add(std::string("reduce=") + (reduce == GpuReduce::workgroup ? "workgroup" : "thread"));
    if (tile != 0) add("tile=" + std::to_string(tile));
    if (vector_loads != 0) add("vector_loads=" + std::to_string(vector_loads));
    if (splits != 0) add("splits=" + std::to_string(splits));
    return s;
  }
};

}  // namespace kiln::codegen
