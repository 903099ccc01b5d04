// kiln::Error: the user-facing error value returned across every API boundary, and KILN_CHECK.
#pragma once

// kiln's C++ headers need C++23 (std::expected); CMake's kiln::kiln target asks for it.
#include <version>
#if !defined(__cpp_lib_expected) || __cpp_lib_expected < 202202L
#error "kiln's C++ API needs C++23 (std::expected): compile with -std=c++23 (GCC 12: -std=c++2b), or use the C API, kiln/kiln_c.h"
#endif

#include <cstdio>
#include <cstdlib>
#include <expected>
#include <sstream>
#include <string>
#include <utility>

namespace kiln {

// A user error: one message that says what was wrong, where, and what was expected.
struct Error {
  std::string message;
};

template <class T>
using Expected = std::expected<T, Error>;

inline std::unexpected<Error> make_error(std::string message) {
  return std::unexpected<Error>(Error{std::move(message)});
}

namespace detail {
// Collects the context streamed after KILN_CHECK and aborts when destroyed.
class CheckFailure {
 public:
  CheckFailure(const char* cond, const char* file, int line) {
    stream_ << file << ":" << line << ": internal invariant failed: " << cond << ": ";
  }
  [[noreturn]] ~CheckFailure() {
    std::fprintf(stderr, "kiln: %s\n", stream_.str().c_str());
    std::abort();
  }
  template <class T>
  CheckFailure& operator<<(const T& v) {
    stream_ << v;
    return *this;
  }

 private:
  std::ostringstream stream_;
};
}  // namespace detail
}  // namespace kiln

// Internal invariant: aborts with context. Never use for user errors.
#define KILN_CHECK(cond) \
  if (cond) {            \
  } else                 \
    ::kiln::detail::CheckFailure(#cond, __FILE__, __LINE__)
