// The kiln.toml schema (internal to config.cpp): every key, how its value is checked, stored and
// printed.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "runtime/config.h"

namespace kiln::runtime::config_detail {

// How the text of an environment override becomes a TOML value before it is checked like one.
enum class EnvShape { text, integer, number, boolean, scope, targets };

struct KeySpec {
  std::string key;  // dotted, e.g. "fusion.beam_search.max_blocks"
  EnvShape env_shape;
  // Checks `value` and stores it in `c`; on a bad value returns why ("expected ..., got ...").
  // Relative paths resolve against `root` (the project root).
  std::function<std::optional<std::string>(const toml::node& value, Config& c,
                                           const std::filesystem::path& root)>
      apply;
  std::function<std::string(const Config& c)> print;  // the effective value, in TOML syntax
};

// Every key, in the order `kiln config` prints them.
const std::vector<KeySpec>& key_specs();
const KeySpec* find_key(const std::string& dotted);
// The tables that hold keys ("fusion", "fusion.beam_search", "fusion.beam_search.logger", ...).
bool is_section(const std::string& dotted);
const std::vector<std::string>& section_names();

// KILN_ + the dotted key in upper case with '.' as '_': KILN_FUSION_BEAM_SEARCH_MAX_BLOCKS.
std::string env_name(const std::string& dotted);
// The value an override stands for: "3" an integer, "true" a boolean, "file=PATH" a file table,
// "stdout,file=a.log" an array of targets; text that does not fit stays a string so that the
// key's own check reports it.
std::unique_ptr<toml::node> env_value(EnvShape shape, const std::string& text);

// A value as a message shows it: "fast" quoted, 5, true, a table, an array.
std::string describe(const toml::node& value);

}  // namespace kiln::runtime::config_detail
