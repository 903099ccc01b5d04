// Internal: what the C API's source files share: the handles behind the opaque C types, the
// thread's last error, and the guards every C function uses so that no C++ exception or error
// crosses into C.
#pragma once

#include <fmt/format.h>

#include <exception>
#include <new>
#include <optional>
#include <span>
#include <string>

#include "kiln/kiln.h"
#include "kiln/kiln_c.h"

struct kiln_options_s {
  kiln::Options options;
};
struct kiln_device_s {
  kiln::Device device;
  std::string name;
};
struct kiln_tensor_s {
  kiln::Tensor tensor;
};

namespace kiln::c_api {

// kiln_last_error()'s message, per thread.
inline thread_local std::string last_error;

inline kiln_status fail(kiln_status status, std::string message) {
  last_error = std::move(message);
  return status;
}

// Runs `body`, turning an exception (an allocation that could not be met, mostly) into a status:
// none may cross into C.
template <class F>
kiln_status guarded(const char* fn, F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(KILN_ERROR_DEVICE, fmt::format("{}: out of memory", fn));
  } catch (const std::exception& e) {
    return fail(KILN_ERROR_DEVICE, fmt::format("{}: {}", fn, e.what()));
  } catch (...) {
    return fail(KILN_ERROR_DEVICE, fmt::format("{}: unknown failure", fn));
  }
}

inline kiln_status null_argument(const char* fn, const char* name) {
  return fail(KILN_ERROR_INVALID_ARGUMENT, fmt::format("{}: {} is NULL", fn, name));
}

// Tensors of two devices, as KILN_ERROR_INVALID_OPERATION (nothing runs), and KILN_OK where
// every tensor of `ts` (named `what`[i] in the message) lives on `device`, or with no device
// given, on the first one's. Two devices of one name are two: the message says so.
inline kiln_status one_device(const char* fn, const char* what, std::span<const kiln::Tensor> ts,
                              std::optional<kiln::Device> device = std::nullopt) {
  const bool of_call = device.has_value();
  for (size_t i = 0; i < ts.size(); ++i) {
    const std::optional<kiln::Device> d = ts[i].device();
    if (!d) continue;  // an empty tensor: the call reports it
    if (!device) device = d;
    if (*d == *device) continue;
    const std::string which = device->name() == d->name()
                                  ? fmt::format("both named '{}', opened apart", d->name())
                                  : fmt::format("'{}' and '{}'", device->name(), d->name());
    return fail(KILN_ERROR_INVALID_OPERATION,
                of_call ? fmt::format("{}: {}[{}] lives on another device than the call's ({}); "
                                      "give it tensors of the device it runs on",
                                      fn, what, i, which)
                        : fmt::format("{}: {}[0] and {}[{}] live on two devices ({}); pass "
                                      "each device's tensors apart",
                                      fn, what, what, i, which));
  }
  return KILN_OK;
}

}  // namespace kiln::c_api
