// Parsing and printing byte sizes with binary (KiB, MiB, GiB, TiB) and decimal (kB, MB, ...)
// units.
#include "cache/size.h"

#include <cctype>
#include <charconv>
#include <limits>

#include <fmt/format.h>

namespace kiln::cache {
namespace {

struct Unit {
  std::string_view name;
  int64_t factor;
};

constexpr Unit kUnits[] = {
    {"", 1},
    {"b", 1},
    {"k", 1LL << 10},
    {"kib", 1LL << 10},
    {"m", 1LL << 20},
    {"mib", 1LL << 20},
    {"g", 1LL << 30},
    {"gib", 1LL << 30},
    {"t", 1LL << 40},
    {"tib", 1LL << 40},
    {"kb", 1000},
    {"mb", 1000000},
    {"gb", 1000000000},
    {"tb", 1000000000000LL},
};

}  // namespace

Expected<int64_t> parse_size(std::string_view text) {
  auto bad = [&] {
    return make_error(
        fmt::format("bad size '{}': expected a whole number of bytes with an optional unit "
                    "(KiB, MiB, GiB, TiB, kB, MB, GB, TB), e.g. 512MiB",
                    text));
  };
  int64_t number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || end == text.data() || number < 0) return bad();
  std::string unit;
  for (const char* p = end; p != text.data() + text.size(); ++p)
    if (*p != ' ') unit += static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    if (number > std::numeric_limits<int64_t>::max() / u.factor) return bad();
    return number * u.factor;
  }
  return bad();
}

std::string format_size(int64_t bytes) {
  constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, kNames[unit]);
}

}  // namespace kiln::cache
