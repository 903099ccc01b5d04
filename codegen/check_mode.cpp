// Names of the check modes and the message of a validating kernel's error slot.
#include "codegen/check_mode.h"

#include <fmt/format.h>

namespace kiln::codegen {

std::string_view check_mode_name(CheckMode mode) {
  switch (mode) {
    case CheckMode::none:
      return "none";
    case CheckMode::enforce:
      return "enforce";
    case CheckMode::validate:
      return "validate";
  }
  return "?";
}

std::optional<std::string> describe_check_failure(const kir::Kernel& kernel, const int64_t* slot) {
  if (slot[kCheckFlag] == 0) return std::nullopt;
  const int64_t buf = slot[kCheckBuf];
  const char* what = slot[kCheckKind] == kCheckStore ? "store" : "load";
  const bool known = buf >= 0 && buf < static_cast<int64_t>(kernel.params.size());
  std::string label, length = "?";
  if (known) {
    const kir::Param& p = kernel.params[buf];
    if (!p.label.empty()) label = fmt::format(" ({})", p.label);
    length = fmt::format("{}", ir::shape_numel(p.shape));
  }
  return fmt::format("kernel {}: {} of param %{}{} at index {} is outside its {} elements",
                     kernel.name, what, buf, label, slot[kCheckIndex], length);
}

}  // namespace kiln::codegen
