// Bounds checks compiled into kernels (kiln.toml compilation.check_mode, DESIGN.md §10) and the
// error slot through which a validating kernel reports its first out-of-range access.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ir/kernel_ir.h"

namespace kiln::codegen {

enum class CheckMode : uint8_t {
  none,      // indices are trusted (the kernel IR contract): no extra code
  enforce,   // every index is clamped into [0, length): no access leaves its buffer
  validate,  // every index is checked; the first bad access is recorded and suppressed
};

std::string_view check_mode_name(CheckMode mode);  // "none", "enforce", "validate"

// A validating kernel takes one more buffer after its parameters: kCheckSlotWords int64 words,
// zeroed before the launch. Word 0 becomes 1 when the first bad access claims the slot (atomic,
// so concurrent chunks agree on one); the others then hold its kind, parameter and index.
constexpr int kCheckSlotWords = 4;
enum CheckSlotWord : int { kCheckFlag = 0, kCheckKind = 1, kCheckBuf = 2, kCheckIndex = 3 };
enum CheckAccessKind : int64_t { kCheckLoad = 0, kCheckStore = 1 };

// The message for a filled slot, e.g. "kernel k0: load of param %1 (x) at index 1234 is outside
// its 1000 elements"; nullopt when the slot records no failure.
std::optional<std::string> describe_check_failure(const kir::Kernel& kernel, const int64_t* slot);

}  // namespace kiln::codegen
