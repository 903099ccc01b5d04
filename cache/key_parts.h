// How key parts are stored: the JSON array of [name, value] pairs kept beside each entry, and the
// identity digest that finds the entries a missed key should be explained against.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/store.h"

namespace kiln::cache {

using PartList = std::vector<std::pair<std::string, std::string>>;

// [["kernel","..."],["target","cpu"],...]; nullopt when a value is not valid UTF-8 text.
std::optional<std::string> parts_to_json(const PartList& parts);
// The inverse; nullopt when `json` is not an array of [string, string] pairs.
std::optional<PartList> parts_from_json(const std::string& json);

// The digest of the identity part alone (name and value), indexed per table.
std::string identity_digest(const KeyParts& key);

// The seal of a stored entry: the digest of everything a reader trusts (key, parts, value, source
// and metadata), kept in the entry's `checksum` column and checked on every read, so that a flipped
// byte anywhere in an entry is a miss and never a wrong artifact.
std::string entry_seal(std::string_view key, std::string_view parts, std::span<const uint8_t> value,
                       std::string_view source, std::string_view metadata);

// The parts of `stored` and `wanted` that differ, by name, in `wanted`'s order and then the
// stored-only names; a missing part reads as "(absent)".
std::vector<std::tuple<std::string, std::string, std::string>> differing_parts(
    const PartList& stored, const PartList& wanted);

}  // namespace kiln::cache
