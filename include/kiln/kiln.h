// kiln's public C++ API: lazy tensors recorded into a graph and realized by a named device.
// Needs C++23; link libkiln.so (CMake: find_package(kiln) and kiln::kiln; docs/embedding.md).
//
//   auto dev = kiln::Device::open("cpu").value();
//   kiln::Tensor a = kiln::Tensor::from_host(dev, std::vector<float>(n, 1.f), {n});
//   kiln::Tensor y = kiln::gelu(a * b + c);          // recorded, nothing runs
//   std::vector<float> out = y.to_vector<float>().value();  // fused, compiled, run
//
// Errors are values: an op on bad shapes or dtypes yields a Tensor that carries the error (every
// tensor computed from it carries it too); realize()/to_vector() return it as kiln::Error.
//
// Threads. Device and Tensor are handles to shared state, like std::shared_ptr:
// - One Device or Tensor (and copies of it) may be used from any number of threads at once:
//   recording ops on it, realize(), to_host()/to_vector(), dtype()/shape(), copying it.
// - Realizing a tensor that another thread is realizing waits for that realize and returns its
//   result (the work is done once). Realizes of independent tensors run at the same time, on one
//   device or several; recording takes no lock and never waits for a realize.
// - Memory: a tensor holds its operands until it is realized, then only its buffer; no graph
//   outlives a realize, so a program that keeps realizing holds what its live tensors need.
// - Device::last_stats() reports the latest realize on the device, from whichever thread.
// - Not allowed: assigning to, moving from or destroying a Tensor or Device *object* while another
//   thread uses that same object. Give each thread its own copy (copies are cheap).
// - HostTensor and the vectors returned are plain values owned by the caller.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/export.h"
#include "kiln/host_tensor.h"
#include "kiln/shape.h"

struct DLManagedTensor;  // DLPack (dlpack/dlpack.h): kiln::Tensor::from_dlpack and to_dlpack

namespace kiln {

using ir::DType;
using ir::HostTensor;
using ir::Shape;

namespace detail {
struct DeviceState;
struct TensorImpl;
struct KgFile;
}  // namespace detail

struct RealizeStats {
  int kernels = 0;
  int compiled = 0;
  double compile_ms = 0;
  double run_ms = 0;
  // The plan was in the device's memory from an earlier realize of the graph (plan_source
  // "memory"); one read from the persistent cache ("disk") or made from a symbolic plan
  // ("symbolic") is not a hit here.
  bool plan_cache_hit = false;
  // Results written over an operand's buffer (buffer donation, docs/embedding.md): `w = w - lr * g`
  // reuses w's buffer when nothing else holds w.
  int donated = 0;
  // Kernels that take their outer size, or their inner sizes, at run time (docs/dynamic-shapes.md),
  // and why this realize compiled for a graph seen before at other sizes: the input dimension that
  // changed, the kernels generalized.
  int dynamic_kernels = 0;
  std::vector<std::string> recompiles;
  // Where the plan came from: "memory" (this device ran these shapes before), "symbolic" (the
  // symbolic plan of the graph at other sizes: nothing lowered or compiled), "disk" (the
  // persistent cache) or "built".
  std::string plan_source;
};

// The settings a device opens with (docs/embedding.md lists them): every kiln.toml key by its
// dotted name, with the value written as text as kiln.toml takes it ({"autotune.level",
// "balanced"}, {"compilation.cache", "file=/var/lib/app/kiln.sqlite"}, {"autotune.enabled",
// "false"}, {"compilation.logger.targets", "log"}), plus "threads" (the cpu's threads, "0" = every
// core) and "cpu_rates" / "gpu_rates" (the cost model's rates: "measured" on this machine, the
// default, or the fixed "reference" ones, as KILN_CPU_RATES / KILN_GPU_RATES). Applied in order;
// a later setting of a key wins.
struct Options {
  std::vector<std::pair<std::string, std::string>> settings;
  // Also read kiln.toml (KILN_CONFIG, else found upward from `config_dir`, "" = the working
  // directory) and the KILN_* environment, as the `kiln` program does; `settings` apply over them.
  bool use_config = false;
  std::string config_dir;
};

// Where the `log` logger target's lines go, for the whole process: (component, level, message),
// called from whichever thread logs. An empty function removes it.
using LogCallback = std::function<void(std::string_view component, std::string_view level,
                                       std::string_view message)>;
KILN_EXPORT void set_log_callback(LogCallback callback);

class KILN_EXPORT Device {
 public:
  // "cpu", "reference" (the f64 interpreter), "vulkan:N" or "cuda:N", with kiln's default
  // settings under `options`. A bad setting or a device that is not there is an error saying so.
  static Expected<Device> open(std::string_view name, const Options& options);
  // Reads kiln.toml and the environment as the `kiln` program does: open(name, {.use_config = true}).
  static Expected<Device> open(std::string_view name);
  // Checks one setting (key and value) as open() would, without opening anything.
  static Expected<void> check_setting(std::string_view key, std::string_view value);
  std::string name() const;
  // Statistics of the most recent realize on this device.
  RealizeStats last_stats() const;
  // One device (this handle or a copy of it): two devices opened by one name are two.
  bool operator==(const Device& other) const { return state_ == other.state_; }

 private:
  friend class Tensor;
  friend struct detail::TensorImpl;
  friend KILN_EXPORT Expected<void> realize(const std::vector<class Tensor>&);
  explicit Device(std::shared_ptr<detail::DeviceState> s) : state_(std::move(s)) {}
  std::shared_ptr<detail::DeviceState> state_;
};

class KILN_EXPORT Tensor {
 public:
  Tensor() = default;  // empty: every use reports an error

  static Tensor from_host(const Device& dev, const HostTensor& data);
  static Tensor from_host(const Device& dev, std::span<const float> data, Shape shape);
  static Tensor from_host(const Device& dev, std::span<const double> data, Shape shape);
  static Tensor from_host(const Device& dev, std::span<const int32_t> data, Shape shape);
  static Tensor from_host(const Device& dev, std::span<const int64_t> data, Shape shape);
  static Tensor from_host_bool(const Device& dev, const std::vector<bool>& data, Shape shape);
  static Tensor full(const Device& dev, Shape shape, double value, DType dtype = DType::f32);
  static Tensor arange(const Device& dev, int64_t start, int64_t end, int64_t step = 1,
                       DType dtype = DType::i32);

  // DLPack. A CPU tensor (kDLCPU) of a kiln dtype, lanes 1. Compact (strides null or row-major)
  // and aligned to its element size: used in place, no copy, and `managed`'s deleter runs when
  // kiln is done with it (the last tensor reading it is gone); its memory is read when a realize
  // runs, so its owner must not change it while kiln holds it. Any other strides: copied, and the
  // deleter runs before this returns. On an error (another device, an unknown dtype) kiln does not
  // take `managed`: its deleter is not called. Bool is DLPack's kDLBool (code 6, lanes 1, 8 bits).
  static Tensor from_dlpack(const Device& dev, DLManagedTensor* managed);

  bool ok() const;
  const Error* error() const;  // null when ok
  DType dtype() const;
  Shape shape() const;
  int64_t numel() const;
  // The device it lives on (an op's error tensor too); nullopt for a default-constructed Tensor.
  std::optional<Device> device() const;

  // Marks axis `axis` dynamic (docs/dynamic-shapes.md): where this tensor is an input of a realize
  // (made from data, or realized before), the plan's kernels take that size at run time, so a
  // graph recorded again at another size of the axis compiles no kernel anew. `name` names the
  // size symbol in dumps ("" = "s<axis>"). An axis out of range is an error; a tensor already in
  // a realize may take the mark from its next one.
  Expected<void> mark_dynamic(int64_t axis, std::string name = "");
  // Runs everything this tensor depends on; later ops read the result without recomputing.
  Expected<void> realize();
  Expected<HostTensor> to_host();
  // Realizes and hands out the result's buffer without a copy, as a DLPack CPU tensor (compact,
  // strides null) that keeps the buffer alive until its deleter is called (exactly once).
  Expected<DLManagedTensor*> to_dlpack();
  // Realizes and copies the result out as T: the bytes as they are where T is the dtype's own
  // type; else converted, an i64 exactly to any integer T (modulo 2^N, as C++ converts), a float
  // to an integer T saturated (NaN gives 0), any value to bool as != 0.
  template <class T>
  Expected<std::vector<T>> to_vector();

  // Elementwise (numpy broadcasting); scalars take this tensor's dtype.
  Tensor operator-() const;
  Tensor cast(DType to) const;
  // Reductions; empty axes = all axes.
  Tensor sum(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor mean(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor max(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor min(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor prod(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor argmax(int64_t axis, bool keepdim = false) const;
  Tensor argmin(int64_t axis, bool keepdim = false) const;
  // Views (free: they become index expressions of loads).
  Tensor reshape(std::vector<int64_t> shape) const;
  Tensor permute(std::vector<int64_t> dims) const;
  Tensor transpose() const;  // swaps the last two axes
  Tensor expand(Shape shape) const;
  Tensor slice(int64_t axis, std::optional<int64_t> start, std::optional<int64_t> end,
               int64_t step = 1) const;
  Tensor pad(std::vector<int64_t> before, std::vector<int64_t> after, double value = 0) const;
  Tensor flip(std::vector<int64_t> axes) const;
  Tensor roll(std::vector<int64_t> shifts, std::vector<int64_t> axes) const;
  Tensor unfold(int64_t dim, int64_t size, int64_t step) const;

 private:
  friend struct detail::TensorImpl;
  friend KILN_EXPORT Expected<void> realize(const std::vector<Tensor>&);
  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::TensorImpl> impl_;
};

// Realizes several tensors in one request (one plan, shared intermediates).
KILN_EXPORT Expected<void> realize(const std::vector<Tensor>& tensors);

// The elementwise ops, one function per elementwise row of the op table (kiln/ops.def, its `api`
// column): unary neg abs exp log sqrt rsqrt recip sin cos tanh sigmoid relu gelu erf floor ceil
// sign logical_not as f(x); binary add sub mul div pow maximum minimum eq ne lt le gt ge
// logical_and logical_or as f(a, b), broadcasting like numpy; where(cond, a, b). Their meaning:
// docs/graph-format.md. (cast is Tensor::cast.)
#define KILN_API_unary(fn) KILN_EXPORT Tensor fn(const Tensor& x);
#define KILN_API_binary(fn) KILN_EXPORT Tensor fn(const Tensor& a, const Tensor& b);
#define KILN_API_ternary(fn) KILN_EXPORT Tensor fn(const Tensor& cond, const Tensor& a, const Tensor& b);
#define KILN_API_member(fn)
#define KILN_API_manual(fn)
#define KILN_ELEMENTWISE(Enum, name, arity, dtypes, cost, api) KILN_API_##api
#include "kiln/ops.def"
#undef KILN_API_unary
#undef KILN_API_binary
#undef KILN_API_ternary
#undef KILN_API_member
#undef KILN_API_manual
KILN_EXPORT Tensor concat(const std::vector<Tensor>& xs, int64_t axis);
KILN_EXPORT Tensor matmul(const Tensor& a, const Tensor& b);
// Indexed reads (idx i32 or i64; an index i < 0 reads i + n, then indices are clamped into
// [0, n), n = x's length along axis). gather: numpy take / ONNX Gather, out.shape =
// x.shape[:axis] + idx.shape + x.shape[axis+1:]. gather_elements: numpy take_along_axis / ONNX
// GatherElements / torch.gather, idx of x's rank, out.shape = idx.shape.
KILN_EXPORT Tensor gather(const Tensor& x, const Tensor& idx, int64_t axis);
KILN_EXPORT Tensor gather_elements(const Tensor& x, const Tensor& idx, int64_t axis);
// Indexed write (ONNX ScatterElements, numpy put_along_axis): x with, for every position p of
// idx (i32 or i64, x's rank, no axis but `axis` longer than x's), the element at p with
// p[axis] = idx[p] replaced by upd[p] (upd: idx's shape, x's dtype) for reduction "none", or
// combined with it by "add", "mul", "max" or "min". An index i < 0 means i + n, once; an index
// still outside [0, n) drops its update. Duplicate indices with "none": the last update along
// the axis wins. Deterministic on every device (no atomics).
KILN_EXPORT Tensor scatter_elements(const Tensor& x, const Tensor& idx, const Tensor& upd,
                                    int64_t axis, std::string_view reduction = "none");
// The running sum along `axis` (ONNX CumSum; negative axes count from the end): exclusive sums
// only the elements before each one (0 first), reverse runs from the end of the axis. Any dtype
// but bool; integer sums wrap, float sums run in order (one sequential sum per row).
KILN_EXPORT Tensor cumsum(const Tensor& x, int64_t axis, bool exclusive = false,
                          bool reverse = false);
// The k largest (or smallest) elements along `axis` (ONNX TopK, torch.topk; negative axes count
// from the end; 0 <= k <= n) and their i64 indices, best first: equal values keep ascending index
// order and NaN ranks above every number (first when largest, last when smallest). Any dtype but
// bool. `sorted` = false (ONNX's "any order") gets the same sorted result. The indices are one
// kernel (a selection per step along the axis, O(n*k) per row); the values gather x at them.
struct TopK {
  Tensor values;
  Tensor indices;
};
KILN_EXPORT TopK topk(const Tensor& x, int64_t k, int64_t axis = -1, bool largest = true,
                      bool sorted = true);
// The upper (upper=true) or lower triangle of the last two axes (ONNX Trilu, numpy triu/tril):
// x[..., i, j] where j - i >= k (upper) or j - i <= k (lower), 0 elsewhere. x of rank >= 2.
KILN_EXPORT Tensor trilu(const Tensor& x, int64_t k = 0, bool upper = true);
// numpy clip / ONNX Clip (the clip row of kiln/ops.def): min(max(x, lo), hi), a bound left out
// (nullopt) not applied (one bound alone is maximum or minimum). A NaN in x or a bound gives NaN;
// lo > hi gives hi; bounds broadcast and have x's dtype (the scalar form takes x's dtype); bool
// is an error.
KILN_EXPORT Tensor clip(const Tensor& x, const std::optional<Tensor>& lo,
                        const std::optional<Tensor>& hi);
KILN_EXPORT Tensor clip(const Tensor& x, double lo, double hi);
// composites, built from primitives
KILN_EXPORT Tensor softmax(const Tensor& x, int64_t axis = -1);
KILN_EXPORT Tensor log_softmax(const Tensor& x, int64_t axis = -1);
KILN_EXPORT Tensor layernorm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                             int64_t axis = -1, double eps = 1e-5);
KILN_EXPORT Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v,
                             bool causal = false, std::optional<double> scale = std::nullopt);
// Resampling (ONNX Resize with sizes; torch.nn.functional.interpolate): x resized to `sizes`, one
// entry per axis. mode: "nearest", "linear" (n-linear) or "cubic" (A = -0.75; linear and cubic
// need a float x); coordinate_transformation_mode: "half_pixel", "half_pixel_symmetric",
// "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn" or
// "tf_crop_and_resize" (whole axes); nearest_mode: "round_prefer_floor", "round_prefer_ceil",
// "floor" or "ceil". torch's nearest is ("nearest", "asymmetric", "floor"), nearest-exact
// ("nearest", "half_pixel", "round_prefer_ceil"), bilinear ("linear", "pytorch_half_pixel" or
// "align_corners"). Each resized axis is one resize op (kiln/ops.def), the last axis first; the
// fuser inlines it into its readers like a view (an upsample and the elementwise ops around it
// are one kernel).
KILN_EXPORT Tensor resize(const Tensor& x, std::vector<int64_t> sizes,
                          std::string_view mode = "nearest",
                          std::string_view coordinate_transformation_mode = "half_pixel",
                          std::string_view nearest_mode = "round_prefer_floor");

KILN_EXPORT Tensor operator+(const Tensor& a, const Tensor& b);
KILN_EXPORT Tensor operator-(const Tensor& a, const Tensor& b);
KILN_EXPORT Tensor operator*(const Tensor& a, const Tensor& b);
KILN_EXPORT Tensor operator/(const Tensor& a, const Tensor& b);
KILN_EXPORT Tensor operator+(const Tensor& a, double b);
KILN_EXPORT Tensor operator-(const Tensor& a, double b);
KILN_EXPORT Tensor operator*(const Tensor& a, double b);
KILN_EXPORT Tensor operator/(const Tensor& a, double b);
KILN_EXPORT Tensor operator+(double a, const Tensor& b);
KILN_EXPORT Tensor operator-(double a, const Tensor& b);
KILN_EXPORT Tensor operator*(double a, const Tensor& b);
KILN_EXPORT Tensor operator/(double a, const Tensor& b);

// A graph file, read once: `.kg` text (docs/graph-format.md) or an ONNX model (`.onnx`,
// docs/onnx.md; it binds its own initializers and constants, copied to each device at the first
// call there and kept while the graph or a tensor it recorded lives; a symbolic dimension of its
// inputs, its dim_param, is a size symbol as `?b` is in `.kg`: GraphInput::symbols). Called on
// tensors like an op: any number of times, from any number of threads at once, at any size of a
// symbol (the file is read again once per distinct sizes). Copies share the file.
struct GraphInput {
  std::string name;  // without '%'
  DType dtype;
  Shape shape;  // a size symbol's axis at the size the file declares (an ONNX model's: 1, or
                // the first size it reads at, docs/onnx.md)
  // Per axis, its size symbol (`?b` in `.kg`, an ONNX input's dim_param), "" for a fixed size:
  // a call may bind a tensor of any size there (docs/dynamic-shapes.md).
  std::vector<std::string> symbols = {};
};

class KILN_EXPORT Graph {
 public:
  // Errors name the file and where: "FILE:LINE:COL: error: WHAT" for `.kg`, the node for ONNX.
  static Expected<Graph> load(const std::string& path);
  static Expected<Graph> parse(std::string_view kg_text, std::string_view filename = "<text>");
  // Trace and replay: the graph of the ops recorded between `args` and `outputs` (tensors of one
  // device), so that a step recorded once runs again over other tensors without recording each
  // op again. Its inputs are the args (arg0, arg1, ...; call() binds tensors of their dtypes and
  // shapes), its outputs out0, out1, ... Every other realized tensor the ops read (weights) is
  // captured: held by the graph and bound by it at every call, so a call must be on its device,
  // and a tensor whose value changes between calls (a cache) must be an arg. Values the recording
  // took from the host (a Python int, an op's attributes) are part of the graph as they were. A
  // tensor the outputs read that was realized after the args were made (the traced code realized
  // it or read its value) is refused: a call would replay its value, not compute it from the args.
  static Expected<Graph> trace(const std::vector<Tensor>& outputs, const std::vector<Tensor>& args);
  // The inputs a call binds, in declaration order, and the outputs' names, in `output` order.
  std::vector<GraphInput> inputs() const;
  std::vector<std::string> outputs() const;
  // The outputs as tensors of `device`, recorded over `inputs` (in the order inputs() lists them),
  // not run: realize them together to compute their common values once. Each input must have the
  // declared dtype and shape; otherwise the error names the input and what it expects.
  Expected<std::vector<Tensor>> call(const Device& device, const std::vector<Tensor>& inputs) const;
  // The same with each tensor bound to the input it names (a leading '%' is allowed).
  Expected<std::vector<Tensor>> call(const Device& device,
                                     const std::vector<std::pair<std::string, Tensor>>& inputs) const;
  // What realizing the outputs on `device` would run, as `kiln dump --stage STAGE [--why]` shows
  // it: "graph", "groups", "kernels", "analyze" or "source".
  Expected<std::string> dump(const Device& device, std::string_view stage, bool why = false) const;

 private:
  explicit Graph(std::shared_ptr<const detail::KgFile> file) : file_(std::move(file)) {}
  std::shared_ptr<const detail::KgFile> file_;
};

template <class T>
Expected<std::vector<T>> Tensor::to_vector() {
  auto host = to_host();
  if (!host) return std::unexpected(host.error());
  std::vector<T> out(static_cast<size_t>(host->numel()));
  // The dtype whose elements are T's bytes (f32 for any other T: only a conversion is exact).
  constexpr DType same = std::is_same_v<T, double>    ? DType::f64
                         : std::is_same_v<T, int32_t> ? DType::i32
                         : std::is_same_v<T, int64_t> ? DType::i64
                         : std::is_same_v<T, int8_t>  ? DType::i8
                         : std::is_same_v<T, uint8_t> ? DType::u8
                                                      : DType::f32;
  constexpr bool layout_known = std::is_same_v<T, float> || same != DType::f32;
  if constexpr (layout_known) {
    if (host->dtype == same) {
      // Same layout: no conversion, so every i64 is exact (get() goes through double), and an
      // empty tensor has no data to copy (memcpy of null).
      if (!out.empty()) std::memcpy(out.data(), host->data(), host->bytes.size());
      return out;
    }
  }
  for (int64_t i = 0; i < host->numel(); ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      out[static_cast<size_t>(i)] = host->get(i) != 0;
    } else if constexpr (std::is_integral_v<T>) {
      if (host->dtype == DType::i64) {
        // Exact past 2^53 (as C++ converts integers: modulo 2^N into a narrower or unsigned T).
        int64_t v;
        std::memcpy(&v, static_cast<const std::byte*>(host->data()) + i * 8, 8);
        out[static_cast<size_t>(i)] = static_cast<T>(v);
      } else {
        // A float past T's range saturates and NaN is 0, where a cast would be undefined.
        const double v = host->get(i);
        constexpr auto lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
        out[static_cast<size_t>(i)] = v != v                         ? T{0}
                                      : v <= static_cast<double>(lo) ? lo
                                      : v >= static_cast<double>(hi) ? hi
                                                                     : static_cast<T>(v);
      }
    } else {
      out[static_cast<size_t>(i)] = static_cast<T>(host->get(i));
    }
  }
  return out;
}

}  // namespace kiln
