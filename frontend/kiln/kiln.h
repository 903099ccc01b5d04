// kiln's public C++ API: lazy tensors recorded into a graph and realized by a named device.
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
//   result (the work is done once). Realizes on one device run one at a time; recording on that
//   device does not wait for them (it takes a lock only for a few pointer copies).
// - Device::last_stats() reports the latest realize on the device, from whichever thread.
// - Not allowed: assigning to, moving from or destroying a Tensor or Device *object* while another
//   thread uses that same object. Give each thread its own copy (copies are cheap).
// - HostTensor and the vectors returned are plain values owned by the caller.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dtype.h"
#include "ir/host_tensor.h"
#include "ir/shape.h"
#include "support/error.h"

namespace kiln {

using ir::DType;
using ir::HostTensor;
using ir::Shape;

namespace detail {
struct DeviceState;
struct TensorImpl;
}  // namespace detail

struct RealizeStats {
  int kernels = 0;
  int compiled = 0;
  double compile_ms = 0;
  double run_ms = 0;
  bool plan_cache_hit = false;
};

class Device {
 public:
  // "cpu" or "reference". KILN_NUM_THREADS sets the cpu thread count (default: all cores).
  static Expected<Device> open(std::string_view name);
  std::string name() const;
  // Statistics of the most recent realize on this device.
  RealizeStats last_stats() const;

 private:
  friend class Tensor;
  friend Expected<void> realize(const std::vector<class Tensor>&);
  explicit Device(std::shared_ptr<detail::DeviceState> s) : state_(std::move(s)) {}
  std::shared_ptr<detail::DeviceState> state_;
};

class Tensor {
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

  bool ok() const;
  const Error* error() const;  // null when ok
  DType dtype() const;
  Shape shape() const;
  int64_t numel() const;

  // Runs everything this tensor depends on; later ops read the result without recomputing.
  Expected<void> realize();
  Expected<HostTensor> to_host();
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
  friend Expected<void> realize(const std::vector<Tensor>&);
  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::TensorImpl> impl_;
};

// Realizes several tensors in one request (one plan, shared intermediates).
Expected<void> realize(const std::vector<Tensor>& tensors);

// The elementwise ops, one function per elementwise row of the op table (ir/ops.def, its `api`
// column): unary neg abs exp log sqrt rsqrt recip sin cos tanh sigmoid relu gelu erf floor ceil
// sign logical_not as f(x); binary add sub mul div pow maximum minimum eq ne lt le gt ge
// logical_and logical_or as f(a, b), broadcasting like numpy; where(cond, a, b). Their meaning:
// docs/graph-format.md. (cast is Tensor::cast.)
#define KILN_API_unary(fn) Tensor fn(const Tensor& x);
#define KILN_API_binary(fn) Tensor fn(const Tensor& a, const Tensor& b);
#define KILN_API_ternary(fn) Tensor fn(const Tensor& cond, const Tensor& a, const Tensor& b);
#define KILN_API_member(fn)
#define KILN_ELEMENTWISE(Enum, name, arity, dtypes, cost, api) KILN_API_##api
#include "ir/ops.def"
#undef KILN_API_unary
#undef KILN_API_binary
#undef KILN_API_ternary
#undef KILN_API_member
Tensor concat(const std::vector<Tensor>& xs, int64_t axis);
Tensor matmul(const Tensor& a, const Tensor& b);
// composites, built from primitives
Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor log_softmax(const Tensor& x, int64_t axis = -1);
Tensor layernorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int64_t axis = -1,
                 double eps = 1e-5);
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal = false,
                 std::optional<double> scale = std::nullopt);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

template <class T>
Expected<std::vector<T>> Tensor::to_vector() {
  auto host = to_host();
  if (!host) return std::unexpected(host.error());
  std::vector<T> out(static_cast<size_t>(host->numel()));
  constexpr bool is_f32 = std::is_same_v<T, float>, is_f64 = std::is_same_v<T, double>;
  constexpr bool is_i32 = std::is_same_v<T, int32_t>;
  if ((is_f32 && host->dtype == DType::f32) || (is_f64 && host->dtype == DType::f64) ||
      (is_i32 && host->dtype == DType::i32)) {
    std::memcpy(out.data(), host->data(), host->bytes.size());  // same layout: no conversion
  } else {
    for (int64_t i = 0; i < host->numel(); ++i) out[i] = static_cast<T>(host->get(i));
  }
  return out;
}

}  // namespace kiln
