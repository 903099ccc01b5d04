// The C API (include/kiln/kiln_c.h) over the C++ API: each handle holds one C++ value (a Device, a
// Tensor: themselves shared handles), each function checks its C arguments, calls the C++ API,
// and turns an error or an exception into a status and the thread's last message.
#include "kiln/kiln_c.h"

#include <dlfcn.h>
#include <dlpack/dlpack.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "c_api_support.h"
#include "kiln/kiln.h"

using namespace kiln::c_api;

namespace {

using kiln::DType;

// The C enum is the C++ one, value for value (kiln/dtype.h).
static_assert(KILN_F32 == static_cast<int>(DType::f32) && KILN_F64 == static_cast<int>(DType::f64) &&
              KILN_F16 == static_cast<int>(DType::f16) && KILN_BF16 == static_cast<int>(DType::bf16) &&
              KILN_I32 == static_cast<int>(DType::i32) && KILN_I64 == static_cast<int>(DType::i64) &&
              KILN_I8 == static_cast<int>(DType::i8) && KILN_U8 == static_cast<int>(DType::u8) &&
              KILN_BOOL == static_cast<int>(DType::boolean));

bool valid_dtype(int d) { return d >= KILN_F32 && d <= KILN_BOOL; }

// A C shape: `rank` extents at `dims`, each at least 0.
kiln_status read_shape(const char* fn, const int64_t* dims, int32_t rank, kiln::Shape& out) {
  if (rank < 0)
    return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("{}: rank {} is negative", fn, rank));
  if (rank > 0 && !dims) return null_argument(fn, "shape");
  out.assign(dims, dims + rank);
  for (int32_t i = 0; i < rank; ++i)
    if (out[static_cast<size_t>(i)] < 0)
      return fail(KILN_ERROR_INVALID_ARGUMENT,
                  fmt::format("{}: extent {} of the shape is {}", fn, i, out[static_cast<size_t>(i)]));
  return KILN_OK;
}

// `count` int64 values at `values` (NULL allowed when count is 0).
kiln_status read_list(const char* fn, const char* name, const int64_t* values, int32_t count,
                      std::vector<int64_t>& out) {
  if (count < 0)
    return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("{}: {} count {} is negative", fn, name, count));
  if (count > 0 && !values) return null_argument(fn, name);
  out.assign(values, values + count);
  return KILN_OK;
}

// The arguments every tensor source (from_host, full, arange) checks first.
kiln_status check_source(const char* fn, kiln_device device, kiln_dtype dtype, kiln_tensor* out) {
  if (!device) return null_argument(fn, "device");
  if (!out) return null_argument(fn, "out");
  if (!valid_dtype(dtype))
    return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("{}: {} is not a kiln_dtype", fn, int{dtype}));
  return KILN_OK;
}

// Hands `t` out as a new handle, or its error as KILN_ERROR_INVALID_OPERATION.
kiln_status give(const char* fn, kiln::Tensor t, kiln_tensor* out) {
  if (const kiln::Error* e = t.error())
    return fail(KILN_ERROR_INVALID_OPERATION, fmt::format("{}: {}", fn, e->message));
  *out = new kiln_tensor_s{std::move(t)};
  return KILN_OK;
}

// An op over tensor handles: checks them and `out`, then records `make(tensors...)`.
template <class Make, class... Handles>
kiln_status op(const char* fn, kiln_tensor* out, Make&& make, Handles... handles) {
  if (!out) return null_argument(fn, "out");
  if (((handles == nullptr) || ...)) return null_argument(fn, "a tensor operand");
  return guarded(fn, [&] { return give(fn, make(handles->tensor...), out); });
}

// What kiln_dlpack_capsule_destructor calls of the Python C API, looked up in the process once
// (the functions are in the stable ABI of every Python 3); absent outside a Python process.
struct PythonCapsuleApi {
  int (*is_valid)(void* capsule, const char* name) = nullptr;
  void* (*get_pointer)(void* capsule, const char* name) = nullptr;
  void (*fetch_error)(void** type, void** value, void** traceback) = nullptr;
  void (*restore_error)(void* type, void* value, void* traceback) = nullptr;
  bool present() const { return is_valid && get_pointer && fetch_error && restore_error; }
};
template <class F>
void find_symbol(F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
}
const PythonCapsuleApi& python_capsule_api() {
  static const PythonCapsuleApi api = [] {
    PythonCapsuleApi a;
    find_symbol(a.is_valid, "PyCapsule_IsValid");
    find_symbol(a.get_pointer, "PyCapsule_GetPointer");
    find_symbol(a.fetch_error, "PyErr_Fetch");
    find_symbol(a.restore_error, "PyErr_Restore");
    return a;
  }();
  return api;
}
}  // namespace

extern "C" {

const char* kiln_version(void) {
  static const std::string v =
      fmt::format("{}.{}.{}", KILN_VERSION_MAJOR, KILN_VERSION_MINOR, KILN_VERSION_PATCH);
  return v.c_str();
}
int kiln_abi_version(void) { return KILN_C_ABI_VERSION; }

const char* kiln_last_error(void) { return last_error.c_str(); }

const char* kiln_status_name(kiln_status status) {
  switch (status) {
    case KILN_OK: return "KILN_OK";
    case KILN_ERROR_INVALID_ARGUMENT: return "KILN_ERROR_INVALID_ARGUMENT";
    case KILN_ERROR_INVALID_OPERATION: return "KILN_ERROR_INVALID_OPERATION";
    case KILN_ERROR_DEVICE: return "KILN_ERROR_DEVICE";
    case KILN_ERROR_UNSUPPORTED: return "KILN_ERROR_UNSUPPORTED";
  }
  return "(not a kiln_status)";
}

const char* kiln_dtype_name(kiln_dtype dtype) {
  if (!valid_dtype(dtype)) return nullptr;
  return kiln::ir::dtype_name(static_cast<DType>(dtype)).data();  // names are literals
}
size_t kiln_dtype_size(kiln_dtype dtype) {
  if (!valid_dtype(dtype)) return 0;
  return static_cast<size_t>(kiln::ir::dtype_size(static_cast<DType>(dtype)));
}

// ---- Options ---------------------------------------------------------------------------------

kiln_status kiln_options_create(kiln_options* out) {
  if (!out) return null_argument(__func__, "out");
  return guarded(__func__, [&] {
    *out = new kiln_options_s{};
    return KILN_OK;
  });
}
void kiln_options_release(kiln_options options) { delete options; }

kiln_status kiln_options_set(kiln_options options, const char* key, const char* value) {
  if (!options) return null_argument(__func__, "options");
  if (!key) return null_argument(__func__, "key");
  if (!value) return null_argument(__func__, "value");
  return guarded(__func__, [&] {
    if (auto r = kiln::Device::check_setting(key, value); !r)
      return fail(KILN_ERROR_INVALID_ARGUMENT, r.error().message);
    options->options.settings.emplace_back(key, value);
    return KILN_OK;
  });
}

kiln_status kiln_options_use_config(kiln_options options, const char* directory) {
  if (!options) return null_argument(__func__, "options");
  return guarded(__func__, [&] {
    options->options.use_config = true;
    options->options.config_dir = directory ? directory : "";
    return KILN_OK;
  });
}

void kiln_set_log_callback(kiln_log_callback callback, void* user_data) {
  if (!callback) {
    kiln::set_log_callback({});
    return;
  }
  kiln::set_log_callback([callback, user_data](std::string_view component, std::string_view level,
                                               std::string_view message) {
    const std::string c(component), l(level), m(message);  // NUL-terminated for C
    callback(c.c_str(), l.c_str(), m.c_str(), user_data);
  });
}

// ---- Devices ---------------------------------------------------------------------------------

kiln_status kiln_device_open(const char* name, kiln_options options, kiln_device* out) {
  if (!name) return null_argument(__func__, "name");
  if (!out) return null_argument(__func__, "out");
  return guarded(__func__, [&] {
    auto dev = kiln::Device::open(name, options ? options->options : kiln::Options{});
    if (!dev) return fail(KILN_ERROR_DEVICE, dev.error().message);
    *out = new kiln_device_s{std::move(*dev), name};
    return KILN_OK;
  });
}
void kiln_device_release(kiln_device device) { delete device; }
const char* kiln_device_name(kiln_device device) { return device ? device->name.c_str() : ""; }

kiln_status kiln_device_last_stats(kiln_device device, kiln_realize_stats* out) {
  if (!device) return null_argument(__func__, "device");
  if (!out) return null_argument(__func__, "out");
  const kiln::RealizeStats s = device->device.last_stats();
  *out = kiln_realize_stats{s.kernels, s.compiled, s.compile_ms, s.run_ms, s.plan_cache_hit ? 1 : 0};
  return KILN_OK;
}

kiln_status kiln_device_last_dynamic_kernels(kiln_device device, int32_t* out) {
  if (!device) return null_argument(__func__, "device");
  if (!out) return null_argument(__func__, "out");
  *out = device->device.last_stats().dynamic_kernels;
  return KILN_OK;
}

kiln_status kiln_device_last_donated(kiln_device device, int32_t* out) {
  if (!device) return null_argument(__func__, "device");
  if (!out) return null_argument(__func__, "out");
  *out = device->device.last_stats().donated;
  return KILN_OK;
}

kiln_status kiln_device_last_plan_source(kiln_device device, const char** out) {
  if (!device) return null_argument(__func__, "device");
  if (!out) return null_argument(__func__, "out");
  const std::string source = device->device.last_stats().plan_source;
  *out = "";
  for (const char* s : {"memory", "symbolic", "disk", "built"})
    if (source == s) *out = s;
  return KILN_OK;
}

kiln_status kiln_device_last_recompiles(kiln_device device, char* buf, size_t capacity,
                                        size_t* length) {
  if (!device) return null_argument(__func__, "device");
  if (!buf && capacity > 0) return null_argument(__func__, "buf");
  std::string text;
  for (const std::string& line : device->device.last_stats().recompiles)
    text += (text.empty() ? "" : "\n") + line;
  if (length) *length = text.size();
  if (capacity > 0) {
    const size_t n = std::min(text.size(), capacity - 1);
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return KILN_OK;
}

// ---- Tensors ---------------------------------------------------------------------------------

kiln_status kiln_tensor_from_host(kiln_device device, kiln_dtype dtype, const int64_t* shape,
                                  int32_t rank, const void* data, size_t bytes, kiln_tensor* out) {
  const char* fn = __func__;
  if (kiln_status r = check_source(fn, device, dtype, out); r != KILN_OK) return r;
  kiln::Shape s;
  if (kiln_status r = read_shape(fn, shape, rank, s); r != KILN_OK) return r;
  if (bytes > 0 && !data) return null_argument(fn, "data");
  return guarded(fn, [&] {
    const auto d = static_cast<DType>(dtype);
    // The element count, refused past kiln's limit before it can overflow.
    if (auto problem = kiln::ir::shape_size_problem(s))
      return fail(KILN_ERROR_INVALID_ARGUMENT,
                  fmt::format("{}: shape {} {}", fn, kiln::ir::shape_brief(s), *problem));
    const int64_t numel = kiln::ir::shape_numel(s);
    const auto want = static_cast<size_t>(numel) * static_cast<size_t>(kiln::ir::dtype_size(d));
    if (bytes != want)
      return fail(KILN_ERROR_INVALID_ARGUMENT,
                  fmt::format("{}: {} bytes given for {}{}, which takes {}", fn, bytes,
                              kiln::ir::dtype_name(d), kiln::ir::shape_str(s), want));
    kiln::HostTensor h{d, s, std::vector<std::byte>(bytes)};
    if (bytes > 0) std::memcpy(h.bytes.data(), data, bytes);
    return give(fn, kiln::Tensor::from_host(device->device, h), out);
  });
}

kiln_status kiln_full(kiln_device device, kiln_dtype dtype, const int64_t* shape, int32_t rank,
                      double value, kiln_tensor* out) {
  const char* fn = __func__;
  if (kiln_status r = check_source(fn, device, dtype, out); r != KILN_OK) return r;
  kiln::Shape s;
  if (kiln_status r = read_shape(fn, shape, rank, s); r != KILN_OK) return r;
  return guarded(fn, [&] {
    return give(fn, kiln::Tensor::full(device->device, s, value, static_cast<DType>(dtype)), out);
  });
}

kiln_status kiln_arange(kiln_device device, int64_t start, int64_t end, int64_t step,
                        kiln_dtype dtype, kiln_tensor* out) {
  const char* fn = __func__;
  if (kiln_status r = check_source(fn, device, dtype, out); r != KILN_OK) return r;
  return guarded(fn, [&] {
    return give(fn, kiln::Tensor::arange(device->device, start, end, step, static_cast<DType>(dtype)),
                out);
  });
}

kiln_status kiln_tensor_retain(kiln_tensor tensor, kiln_tensor* out) {
  return op(__func__, out, [](const kiln::Tensor& t) { return t; }, tensor);
}
void kiln_tensor_release(kiln_tensor tensor) { delete tensor; }

kiln_status kiln_tensor_dtype(kiln_tensor tensor, kiln_dtype* out) {
  if (!tensor) return null_argument(__func__, "tensor");
  if (!out) return null_argument(__func__, "out");
  *out = static_cast<kiln_dtype>(tensor->tensor.dtype());
  return KILN_OK;
}
kiln_status kiln_tensor_rank(kiln_tensor tensor, int32_t* out) {
  if (!tensor) return null_argument(__func__, "tensor");
  if (!out) return null_argument(__func__, "out");
  *out = static_cast<int32_t>(tensor->tensor.shape().size());
  return KILN_OK;
}
kiln_status kiln_tensor_shape(kiln_tensor tensor, int64_t* dims, int32_t capacity) {
  if (!tensor) return null_argument(__func__, "tensor");
  return guarded(__func__, [&] {
    const kiln::Shape s = tensor->tensor.shape();
    if (capacity < 0 || static_cast<size_t>(capacity) < s.size())
      return fail(KILN_ERROR_INVALID_ARGUMENT,
                  fmt::format("kiln_tensor_shape: capacity {} is less than the rank, {}", capacity,
                              s.size()));
    if (!s.empty() && !dims) return null_argument("kiln_tensor_shape", "dims");
    for (size_t i = 0; i < s.size(); ++i) dims[i] = s[i];
    return KILN_OK;
  });
}
kiln_status kiln_tensor_numel(kiln_tensor tensor, int64_t* out) {
  if (!tensor) return null_argument(__func__, "tensor");
  if (!out) return null_argument(__func__, "out");
  *out = tensor->tensor.numel();
  return KILN_OK;
}

kiln_status kiln_tensor_realize(kiln_tensor tensor) {
  if (!tensor) return null_argument(__func__, "tensor");
  return guarded(__func__, [&] {
    if (auto r = tensor->tensor.realize(); !r) return fail(KILN_ERROR_DEVICE, r.error().message);
    return KILN_OK;
  });
}

kiln_status kiln_tensor_mark_dynamic(kiln_tensor tensor, int64_t axis, const char* name) {
  if (!tensor) return null_argument(__func__, "tensor");
  const char* fn = __func__;  // (inside the lambda __func__ is "operator()")
  return guarded(fn, [&] {
    if (auto r = tensor->tensor.mark_dynamic(axis, name ? name : ""); !r)
      return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("{}: {}", fn, r.error().message));
    return KILN_OK;
  });
}

kiln_status kiln_realize(const kiln_tensor* tensors, size_t count) {
  const char* fn = __func__;
  if (count > 0 && !tensors) return null_argument(fn, "tensors");
  return guarded(fn, [&] {
    std::vector<kiln::Tensor> ts;
    for (size_t i = 0; i < count; ++i) {
      if (!tensors[i])
        return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("kiln_realize: tensors[{}] is NULL", i));
      ts.push_back(tensors[i]->tensor);
    }
    // Tensors of two devices are operands it does not take, as an op's are.
    if (kiln_status st = one_device(fn, "tensors", ts); st != KILN_OK) return st;
    if (auto r = kiln::realize(ts); !r) return fail(KILN_ERROR_DEVICE, r.error().message);
    return KILN_OK;
  });
}

kiln_status kiln_tensor_to_host(kiln_tensor tensor, void* data, size_t bytes) {
  const char* fn = __func__;
  if (!tensor) return null_argument(fn, "tensor");
  return guarded(fn, [&] {
    const kiln::Tensor& t = tensor->tensor;
    const auto want = static_cast<size_t>(t.numel()) * static_cast<size_t>(kiln::ir::dtype_size(t.dtype()));
    if (bytes != want)
      return fail(KILN_ERROR_INVALID_ARGUMENT,
                  fmt::format("{}: {} bytes given for {}{}, which takes {}", fn, bytes,
                              kiln::ir::dtype_name(t.dtype()), kiln::ir::shape_str(t.shape()), want));
    if (want > 0 && !data) return null_argument(fn, "data");
    // Copied once, straight from the realized buffer (to_host would copy it into a HostTensor
    // first).
    auto view = tensor->tensor.to_dlpack();
    if (!view) return fail(KILN_ERROR_DEVICE, view.error().message);
    if (want > 0) std::memcpy(data, (*view)->dl_tensor.data, want);
    (*view)->deleter(*view);
    return KILN_OK;
  });
}

// ---- DLPack ----------------------------------------------------------------------------------

kiln_status kiln_tensor_from_dlpack(kiln_device device, DLManagedTensor* managed, kiln_tensor* out) {
  if (!device) return null_argument(__func__, "device");
  if (!managed) return null_argument(__func__, "managed");
  if (!out) return null_argument(__func__, "out");
  return guarded(__func__, [&] {
    kiln::Tensor t = kiln::Tensor::from_dlpack(device->device, managed);
    if (const kiln::Error* e = t.error())
      return fail(KILN_ERROR_UNSUPPORTED, fmt::format("kiln_tensor_from_dlpack: {}", e->message));
    *out = new kiln_tensor_s{std::move(t)};
    return KILN_OK;
  });
}

kiln_status kiln_tensor_to_dlpack(kiln_tensor tensor, DLManagedTensor** out) {
  if (!tensor) return null_argument(__func__, "tensor");
  if (!out) return null_argument(__func__, "out");
  return guarded(__func__, [&] {
    auto managed = tensor->tensor.to_dlpack();
    if (!managed) return fail(KILN_ERROR_DEVICE, managed.error().message);
    *out = *managed;
    return KILN_OK;
  });
}

void kiln_dlpack_capsule_destructor(void* capsule) {
  const PythonCapsuleApi& py = python_capsule_api();
  if (!capsule || !py.present()) return;
  // A capsule may die while an exception propagates (a consumer that refused it): keep it.
  void *type = nullptr, *value = nullptr, *traceback = nullptr;
  py.fetch_error(&type, &value, &traceback);
  if (py.is_valid(capsule, "dltensor")) {  // not consumed: the tensor is still ours to free
    auto* managed = static_cast<DLManagedTensor*>(py.get_pointer(capsule, "dltensor"));
    if (managed && managed->deleter) managed->deleter(managed);
  }
  py.restore_error(type, value, traceback);
}

// ---- Ops -------------------------------------------------------------------------------------

#define KILN_API_unary(fn)                                                              \
  kiln_status kiln_##fn(kiln_tensor x, kiln_tensor* out) {                            \
    return op("kiln_" #fn, out, [](const kiln::Tensor& a) { return kiln::fn(a); }, x); \
  }
#define KILN_API_binary(fn)                                                                  \
  kiln_status kiln_##fn(kiln_tensor a, kiln_tensor b, kiln_tensor* out) {                    \
    return op("kiln_" #fn, out,                                                              \
              [](const kiln::Tensor& x, const kiln::Tensor& y) { return kiln::fn(x, y); }, a, b); \
  }
#define KILN_API_ternary(fn)                                                                    \
  kiln_status kiln_##fn(kiln_tensor cond, kiln_tensor a, kiln_tensor b, kiln_tensor* out) {     \
    return op("kiln_" #fn, out,                                                                 \
              [](const kiln::Tensor& c, const kiln::Tensor& x, const kiln::Tensor& y) {         \
                return kiln::fn(c, x, y);                                                       \
              },                                                                                \
              cond, a, b);                                                                      \
  }
#define KILN_API_member(fn)
#define KILN_API_manual(fn)  // kiln_clip, below
#define KILN_ELEMENTWISE(Enum, name, arity, dtypes, cost, api) KILN_API_##api
#include "kiln/ops.def"
#undef KILN_API_unary
#undef KILN_API_binary
#undef KILN_API_ternary
#undef KILN_API_member
#undef KILN_API_manual

kiln_status kiln_add_scalar(kiln_tensor x, double s, kiln_tensor* out) {
  return op(__func__, out, [s](const kiln::Tensor& a) { return a + s; }, x);
}
kiln_status kiln_sub_scalar(kiln_tensor x, double s, kiln_tensor* out) {
  return op(__func__, out, [s](const kiln::Tensor& a) { return a - s; }, x);
}
kiln_status kiln_rsub_scalar(kiln_tensor x, double s, kiln_tensor* out) {
  return op(__func__, out, [s](const kiln::Tensor& a) { return s - a; }, x);
}
kiln_status kiln_mul_scalar(kiln_tensor x, double s, kiln_tensor* out) {
  return op(__func__, out, [s](const kiln::Tensor& a) { return a * s; }, x);
}
kiln_status kiln_div_scalar(kiln_tensor x, double s, kiln_tensor* out) {
  return op(__func__, out, [s](const kiln::Tensor& a) { return a / s; }, x);
}
kiln_status kiln_rdiv_scalar(kiln_tensor x, double s, kiln_tensor* out) {
  return op(__func__, out, [s](const kiln::Tensor& a) { return s / a; }, x);
}
kiln_status kiln_cast(kiln_tensor x, kiln_dtype to, kiln_tensor* out) {
  if (!valid_dtype(to))
    return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("kiln_cast: {} is not a kiln_dtype", int{to}));
  return op(__func__, out, [to](const kiln::Tensor& a) { return a.cast(static_cast<DType>(to)); }, x);
}

namespace {
using Reduction = kiln::Tensor (kiln::Tensor::*)(std::vector<int64_t>, bool) const;
kiln_status reduction(const char* fn, Reduction r, kiln_tensor x, const int64_t* axes,
                      int32_t count, int keepdim, kiln_tensor* out) {
  std::vector<int64_t> a;
  if (kiln_status s = read_list(fn, "axes", axes, count, a); s != KILN_OK) return s;
  return op(fn, out, [&](const kiln::Tensor& t) { return (t.*r)(a, keepdim != 0); }, x);
}
}  // namespace

kiln_status kiln_sum(kiln_tensor x, const int64_t* axes, int32_t count, int keepdim, kiln_tensor* out) {
  return reduction(__func__, &kiln::Tensor::sum, x, axes, count, keepdim, out);
}
kiln_status kiln_mean(kiln_tensor x, const int64_t* axes, int32_t count, int keepdim, kiln_tensor* out) {
  return reduction(__func__, &kiln::Tensor::mean, x, axes, count, keepdim, out);
}
kiln_status kiln_max(kiln_tensor x, const int64_t* axes, int32_t count, int keepdim, kiln_tensor* out) {
  return reduction(__func__, &kiln::Tensor::max, x, axes, count, keepdim, out);
}
kiln_status kiln_min(kiln_tensor x, const int64_t* axes, int32_t count, int keepdim, kiln_tensor* out) {
  return reduction(__func__, &kiln::Tensor::min, x, axes, count, keepdim, out);
}
kiln_status kiln_prod(kiln_tensor x, const int64_t* axes, int32_t count, int keepdim, kiln_tensor* out) {
  return reduction(__func__, &kiln::Tensor::prod, x, axes, count, keepdim, out);
}
kiln_status kiln_argmax(kiln_tensor x, int64_t axis, int keepdim, kiln_tensor* out) {
  return op(__func__, out, [&](const kiln::Tensor& t) { return t.argmax(axis, keepdim != 0); }, x);
}
kiln_status kiln_argmin(kiln_tensor x, int64_t axis, int keepdim, kiln_tensor* out) {
  return op(__func__, out, [&](const kiln::Tensor& t) { return t.argmin(axis, keepdim != 0); }, x);
}

kiln_status kiln_reshape(kiln_tensor x, const int64_t* shape, int32_t rank, kiln_tensor* out) {
  std::vector<int64_t> s;
  if (kiln_status r = read_list(__func__, "shape", shape, rank, s); r != KILN_OK) return r;
  return op(__func__, out, [&](const kiln::Tensor& t) { return t.reshape(s); }, x);
}
kiln_status kiln_permute(kiln_tensor x, const int64_t* dims, int32_t count, kiln_tensor* out) {
  std::vector<int64_t> d;
  if (kiln_status r = read_list(__func__, "dims", dims, count, d); r != KILN_OK) return r;
  return op(__func__, out, [&](const kiln::Tensor& t) { return t.permute(d); }, x);
}
kiln_status kiln_transpose(kiln_tensor x, kiln_tensor* out) {
  return op(__func__, out, [](const kiln::Tensor& t) { return t.transpose(); }, x);
}
kiln_status kiln_expand(kiln_tensor x, const int64_t* shape, int32_t rank, kiln_tensor* out) {
  std::vector<int64_t> s;
  if (kiln_status r = read_list(__func__, "shape", shape, rank, s); r != KILN_OK) return r;
  return op(__func__, out, [&](const kiln::Tensor& t) { return t.expand(s); }, x);
}
kiln_status kiln_slice(kiln_tensor x, int64_t axis, int has_start, int64_t start, int has_end,
                       int64_t end, int64_t step, kiln_tensor* out) {
  std::optional<int64_t> from, to;
  if (has_start) from = start;
  if (has_end) to = end;
  return op(__func__, out, [&](const kiln::Tensor& t) { return t.slice(axis, from, to, step); }, x);
}
kiln_status kiln_pad(kiln_tensor x, const int64_t* before, const int64_t* after, int32_t count,
                     double value, kiln_tensor* out) {
  std::vector<int64_t> b, a;
  if (kiln_status r = read_list(__func__, "before", before, count, b); r != KILN_OK) return r;
  if (kiln_status r = read_list(__func__, "after", after, count, a); r != KILN_OK) return r;
  return op(__func__, out, [&](const kiln::Tensor& t) { return t.pad(b, a, value); }, x);
}
kiln_status kiln_flip(kiln_tensor x, const int64_t* axes, int32_t count, kiln_tensor* out) {
  std::vector<int64_t> a;
  if (kiln_status r = read_list(__func__, "axes", axes, count, a); r != KILN_OK) return r;
  return op(__func__, out, [&](const kiln::Tensor& t) { return t.flip(a); }, x);
}
kiln_status kiln_roll(kiln_tensor x, const int64_t* shifts, const int64_t* axes, int32_t count,
                      kiln_tensor* out) {
  std::vector<int64_t> s, a;
  if (kiln_status r = read_list(__func__, "shifts", shifts, count, s); r != KILN_OK) return r;
  if (kiln_status r = read_list(__func__, "axes", axes, count, a); r != KILN_OK) return r;
  return op(__func__, out, [&](const kiln::Tensor& t) { return t.roll(s, a); }, x);
}
kiln_status kiln_unfold(kiln_tensor x, int64_t dim, int64_t size, int64_t step, kiln_tensor* out) {
  return op(__func__, out, [&](const kiln::Tensor& t) { return t.unfold(dim, size, step); }, x);
}
kiln_status kiln_concat(const kiln_tensor* xs, int32_t count, int64_t axis, kiln_tensor* out) {
  const char* fn = __func__;
  if (!out) return null_argument(fn, "out");
  if (count < 0)
    return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("{}: count {} is negative", fn, count));
  if (count > 0 && !xs) return null_argument(fn, "xs");
  return guarded(fn, [&] {
    std::vector<kiln::Tensor> ts;
    for (int32_t i = 0; i < count; ++i) {
      if (!xs[i]) return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("{}: xs[{}] is NULL", fn, i));
      ts.push_back(xs[i]->tensor);
    }
    return give(fn, kiln::concat(ts, axis), out);
  });
}

kiln_status kiln_matmul(kiln_tensor a, kiln_tensor b, kiln_tensor* out) {
  return op(__func__, out,
            [](const kiln::Tensor& x, const kiln::Tensor& y) { return kiln::matmul(x, y); }, a, b);
}
kiln_status kiln_gather(kiln_tensor x, kiln_tensor idx, int64_t axis, kiln_tensor* out) {
  return op(__func__, out,
            [&](const kiln::Tensor& t, const kiln::Tensor& i) { return kiln::gather(t, i, axis); },
            x, idx);
}
kiln_status kiln_gather_elements(kiln_tensor x, kiln_tensor idx, int64_t axis, kiln_tensor* out) {
  return op(__func__, out,
            [&](const kiln::Tensor& t, const kiln::Tensor& i) {
              return kiln::gather_elements(t, i, axis);
            },
            x, idx);
}
kiln_status kiln_scatter_elements(kiln_tensor x, kiln_tensor idx, kiln_tensor upd, int64_t axis,
                                  const char* reduction, kiln_tensor* out) {
  const std::string_view r = reduction ? reduction : "none";
  return op(
      __func__, out,
      [&](const kiln::Tensor& t, const kiln::Tensor& i, const kiln::Tensor& u) {
        return kiln::scatter_elements(t, i, u, axis, r);
      },
      x, idx, upd);
}
kiln_status kiln_cumsum(kiln_tensor x, int64_t axis, int exclusive, int reverse, kiln_tensor* out) {
  return op(
      __func__, out,
      [&](const kiln::Tensor& t) { return kiln::cumsum(t, axis, exclusive != 0, reverse != 0); },
      x);
}
kiln_status kiln_topk(kiln_tensor x, int64_t k, int64_t axis, int largest, int sorted,
                      kiln_tensor* values, kiln_tensor* indices) {
  const char* fn = __func__;
  if (!values) return null_argument(fn, "values");
  if (!indices) return null_argument(fn, "indices");
  if (!x) return null_argument(fn, "a tensor operand");
  return guarded(fn, [&] {
    kiln::TopK r = kiln::topk(x->tensor, k, axis, largest != 0, sorted != 0);
    kiln_tensor v = nullptr;
    if (kiln_status st = give(fn, std::move(r.values), &v); st != KILN_OK) return st;
    // Freed if the indices fail (or throw): either both handles are set or neither.
    std::unique_ptr<std::remove_pointer_t<kiln_tensor>> owned(v);
    if (kiln_status st = give(fn, std::move(r.indices), indices); st != KILN_OK) return st;
    *values = owned.release();
    return KILN_OK;
  });
}

kiln_status kiln_clip(kiln_tensor x, kiln_tensor lo, kiln_tensor hi, kiln_tensor* out) {
  using kiln::Tensor;
  if (lo && hi)
    return op(__func__, out,
              [](const Tensor& t, const Tensor& l, const Tensor& h) { return kiln::clip(t, l, h); },
              x, lo, hi);
  if (lo)
    return op(__func__, out,
              [](const Tensor& t, const Tensor& l) { return kiln::clip(t, l, std::nullopt); }, x, lo);
  if (hi)
    return op(__func__, out,
              [](const Tensor& t, const Tensor& h) { return kiln::clip(t, std::nullopt, h); }, x, hi);
  return op(__func__, out, [](const Tensor& t) { return kiln::clip(t, std::nullopt, std::nullopt); }, x);
}
kiln_status kiln_trilu(kiln_tensor x, int64_t k, int upper, kiln_tensor* out) {
  return op(__func__, out, [&](const kiln::Tensor& t) { return kiln::trilu(t, k, upper != 0); }, x);
}
kiln_status kiln_resize(kiln_tensor x, const int64_t* sizes, int32_t rank, const char* mode,
                        const char* coordinate_transformation_mode, const char* nearest_mode,
                        kiln_tensor* out) {
  std::vector<int64_t> s;
  if (kiln_status r = read_list(__func__, "sizes", sizes, rank, s); r != KILN_OK) return r;
  const char* m = mode ? mode : "nearest";
  const char* c = coordinate_transformation_mode ? coordinate_transformation_mode : "half_pixel";
  const char* n = nearest_mode ? nearest_mode : "round_prefer_floor";
  return op(__func__, out, [&](const kiln::Tensor& t) { return kiln::resize(t, s, m, c, n); }, x);
}
kiln_status kiln_softmax(kiln_tensor x, int64_t axis, kiln_tensor* out) {
  return op(__func__, out, [&](const kiln::Tensor& t) { return kiln::softmax(t, axis); }, x);
}
kiln_status kiln_log_softmax(kiln_tensor x, int64_t axis, kiln_tensor* out) {
  return op(__func__, out, [&](const kiln::Tensor& t) { return kiln::log_softmax(t, axis); }, x);
}
kiln_status kiln_layernorm(kiln_tensor x, kiln_tensor gamma, kiln_tensor beta, int64_t axis,
                           double eps, kiln_tensor* out) {
  return op(__func__, out,
            [&](const kiln::Tensor& t, const kiln::Tensor& g, const kiln::Tensor& b) {
              return kiln::layernorm(t, g, b, axis, eps);
            },
            x, gamma, beta);
}
kiln_status kiln_attention(kiln_tensor q, kiln_tensor k, kiln_tensor v, int causal, int has_scale,
                           double scale, kiln_tensor* out) {
  std::optional<double> s;
  if (has_scale) s = scale;
  return op(__func__, out,
            [&](const kiln::Tensor& a, const kiln::Tensor& b, const kiln::Tensor& c) {
              return kiln::attention(a, b, c, causal != 0, s);
            },
            q, k, v);
}

}  // extern "C"
