// Key digests (XXH3-128 over a length-prefixed serialization, so that no two part lists share a
// byte string), the stored JSON form of the parts, and miss explanations.
#include "cache/key_parts.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <nlohmann/json.hpp>

#include <memory>

namespace kiln::cache {
namespace {

void append_length(std::string& out, size_t n) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
}

void append_field(std::string& out, const std::string& s) {
  append_length(out, s.size());
  out += s;
}

std::string one_line(std::string_view value) {
  std::string out;
  for (char c : value) out += (c == '\n') ? std::string("\\n") : std::string(1, c);
  return out;
}

// A long value is shown as a window around `at` (where it first differs from the other value),
// so two long parts that differ deep inside (CPU features, kernel text) do not print alike.
std::string shorten(const std::string& value, size_t at) {
  constexpr size_t kMax = 72, kBefore = 24;
  if (value.size() <= kMax) return "\"" + one_line(value) + "\"";
  size_t start = at > kBefore ? std::min(at - kBefore, value.size() - kMax) : 0;
  return fmt::format("\"{}{}{}\" ({} bytes{})", start ? "..." : "",
                     one_line(std::string_view(value).substr(start, kMax)),
                     start + kMax < value.size() ? "..." : "", value.size(),
                     start ? fmt::format(", from byte {}", start) : "");
}

size_t first_difference(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

std::string hex_of(XXH128_hash_t hash) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, hash);
  std::string hex;
  for (unsigned char b : canonical.digest) hex += fmt::format("{:02x}", b);
  return hex;
}

}  // namespace

std::string KeyParts::digest() const {
  std::string bytes;
  append_length(bytes, parts.size());
  for (const auto& [name, value] : parts) {
    append_field(bytes, name);
    append_field(bytes, value);
  }
  return hex_of(XXH3_128bits(bytes.data(), bytes.size()));
}

std::string entry_seal(std::string_view key, std::string_view parts, std::span<const uint8_t> value,
                       std::string_view source, std::string_view metadata) {
  // Streamed, length-prefixed: a large value is hashed in place, and no two entries share a stream.
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), XXH3_freeState);
  XXH3_128bits_reset(state.get());
  const auto field = [&](const void* data, size_t n) {
    std::string length;
    append_length(length, n);
    XXH3_128bits_update(state.get(), length.data(), length.size());
    XXH3_128bits_update(state.get(), data, n);
  };
  field(key.data(), key.size());
  field(parts.data(), parts.size());
  field(value.data(), value.size());
  field(source.data(), source.size());
  field(metadata.data(), metadata.size());
  return hex_of(XXH3_128bits_digest(state.get()));
}

std::string identity_digest(const KeyParts& key) {
  KeyParts identity;
  if (!key.parts.empty()) identity.parts.push_back(key.identity());
  return identity.digest();
}

std::optional<std::string> parts_to_json(const PartList& parts) {
  nlohmann::json array = nlohmann::json::array();
  for (const auto& [name, value] : parts) array.push_back({name, value});
  try {
    return array.dump();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // invalid UTF-8: cannot be stored faithfully
  }
}

std::optional<PartList> parts_from_json(const std::string& json) {
  auto parsed = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_array()) return std::nullopt;
  PartList parts;
  for (const auto& pair : parsed) {
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string())
      return std::nullopt;
    parts.emplace_back(pair[0].get<std::string>(), pair[1].get<std::string>());
  }
  return parts;
}

std::vector<std::tuple<std::string, std::string, std::string>> differing_parts(
    const PartList& stored, const PartList& wanted) {
  auto find = [](const PartList& list, const std::string& name) -> const std::string* {
    for (const auto& [n, v] : list)
      if (n == name) return &v;
    return nullptr;
  };
  const std::string absent = "(absent)";
  std::vector<std::tuple<std::string, std::string, std::string>> out;
  for (const auto& [name, value] : wanted) {
    const std::string* s = find(stored, name);
    if (!s || *s != value) out.emplace_back(name, s ? *s : absent, value);
  }
  for (const auto& [name, value] : stored)
    if (!find(wanted, name)) out.emplace_back(name, value, absent);
  return out;
}

std::string Explanation::text() const {
  if (hit) return fmt::format("hit: {}", closest_key);
  if (damaged)
    return fmt::format("miss: stored entry {} is damaged (its contents do not match its checksum)",
                       closest_key);
  if (closest_key.empty()) return "miss: no stored entry has the same identity (first key part)";
  if (differing.empty())
    return fmt::format("miss: stored entry {} has the same parts in another order", closest_key);
  std::string out = fmt::format("miss: closest stored entry {} differs in {} part{}:", closest_key,
                                differing.size(), differing.size() == 1 ? "" : "s");
  for (const auto& [name, stored, wanted] : differing) {
    size_t at = first_difference(stored, wanted);
    out += fmt::format("\n  {}: stored {}, wanted {}", name, shorten(stored, at), shorten(wanted, at));
  }
  return out;
}

const char* table_name(Table t) {
  switch (t) {
    case Table::kernels:
      return "kernels";
    case Table::plans:
      return "plans";
    case Table::autotune:
      return "autotune";
  }
  return "kernels";
}

std::optional<Table> parse_table(std::string_view name) {
  for (Table t : kAllTables)
    if (name == table_name(t)) return t;
  return std::nullopt;
}

}  // namespace kiln::cache
