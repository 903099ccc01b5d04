// Parsing and formatting of the `.npy` header dict (a small subset of Python literal syntax).
#include "tools/npy_header.h"

#include <cctype>
#include <optional>
#include <variant>
#include <vector>

#include <fmt/format.h>

namespace kiln::tools::npy {

namespace {

using ir::DType;

struct DescrEntry {
  std::string_view descr;
  DType dtype;
};
// The first spelling of each dtype is the one written; the others are accepted on read.
constexpr DescrEntry kDescrs[] = {{"<f4", DType::f32}, {"<f8", DType::f64},     {"<f2", DType::f16},
                                  {"<i4", DType::i32}, {"<i8", DType::i64},     {"|i1", DType::i8},
                                  {"|u1", DType::u8},  {"|b1", DType::boolean}, {"<i1", DType::i8},
                                  {"<u1", DType::u8},  {"<b1", DType::boolean}};
constexpr std::string_view kSupported = "<f4 <f8 <f2 <i4 <i8 |i1 |u1 |b1";

struct Tuple {
  std::vector<int64_t> items;
};
using Literal = std::variant<std::string, bool, Tuple>;

// Recursive descent over the header text; every error says what was expected where.
class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Expected<std::vector<std::pair<std::string, Literal>>> dict() {
    std::vector<std::pair<std::string, Literal>> entries;
    if (!eat('{')) return fail("'{'");
    while (true) {
      skip_space();
      if (eat('}')) break;
      auto key = string();
      if (!key) return std::unexpected(key.error());
      skip_space();
      if (!eat(':')) return fail("':'");
      auto value = literal();
      if (!value) return std::unexpected(value.error());
      entries.emplace_back(std::move(*key), std::move(*value));
      skip_space();
      if (eat('}')) break;
      if (!eat(',')) return fail("',' or '}'");
    }
    skip_space();
    if (pos_ != s_.size()) return fail("the end of the header after '}'");
    return entries;
  }

 private:
  std::unexpected<Error> fail(std::string_view expected) const {
    // A short excerpt of what is there, without the padding that follows the dict.
    std::string_view rest = s_.substr(pos_, 12);
    while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.back())))
      rest.remove_suffix(1);
    if (rest.empty())
      return make_error(fmt::format("expected {} at the end of the header", expected));
    return make_error(fmt::format("expected {} at offset {}, found \"{}\"", expected, pos_, rest));
  }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool eat_word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }

  Expected<std::string> string() {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return fail("a quoted string");
    const char quote = s_[pos_++];
    const size_t end = s_.find(quote, pos_);
    if (end == std::string_view::npos) return fail("a closing quote");
    std::string out(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }

  Expected<Literal> literal() {
    skip_space();
    if (eat_word("True")) return Literal{true};
    if (eat_word("False")) return Literal{false};
    if (pos_ < s_.size() && s_[pos_] == '(') return tuple();
    auto s = string();
    if (!s) return fail("a string, True, False or a tuple");
    return Literal{std::move(*s)};
  }

  // Python tuple syntax: "()", "(5,)", "(2, 3)"; "(5)" is an int in Python, not a tuple.
  // Python 2 numpy wrote long integers with an L suffix ("(2L, 3L)"); accept it.
  Expected<Literal> tuple() {
    Tuple t;
    bool trailing_comma = false;
    eat('(');
    while (true) {
      skip_space();
      if (eat(')')) break;
      const size_t begin = pos_;
      int64_t v = 0;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
        const int digit = s_[pos_] - '0';
        if (v > (INT64_MAX - digit) / 10) return fail("a dimension of at most 2^63 - 1");
        v = v * 10 + digit;
        ++pos_;
      }
      if (pos_ == begin) return fail("a non-negative integer dimension");
      eat('L');
      t.items.push_back(v);
      skip_space();
      trailing_comma = eat(',');
      if (!trailing_comma) {
        skip_space();
        if (!eat(')')) return fail("',' or ')'");
        break;
      }
    }
    if (t.items.size() == 1 && !trailing_comma)
      return make_error(
          fmt::format("the 1-element shape tuple is written ({0},), not ({0})", t.items[0]));
    return Literal{std::move(t)};
  }

  std::string_view s_;
  size_t pos_ = 0;
};

Expected<DType> dtype_of_descr(const std::string& descr) {
  for (const DescrEntry& e : kDescrs)
    if (e.descr == descr) return e.dtype;
  if (!descr.empty() && descr[0] == '>')
    return make_error(fmt::format(
        "big-endian dtype '{}' is not supported (only little-endian data can be read)", descr));
  return make_error(fmt::format("unsupported dtype '{}' (supported: {})", descr, kSupported));
}

// Checks that the dict has exactly the three keys numpy writes, with the right types.
Expected<Header> header_of(const std::vector<std::pair<std::string, Literal>>& entries) {
  const std::string* descr = nullptr;
  const bool* fortran = nullptr;
  const Tuple* shape = nullptr;
  for (const auto& [key, value] : entries) {
    const bool dup = (key == "descr" && descr) || (key == "fortran_order" && fortran) ||
                     (key == "shape" && shape);
    if (dup) return make_error(fmt::format("malformed header: key '{}' appears twice", key));
    const char* want = nullptr;  // the expected type when the value does not have it
    if (key == "descr") {
      descr = std::get_if<std::string>(&value);
      if (!descr) want = "a string";
    } else if (key == "fortran_order") {
      fortran = std::get_if<bool>(&value);
      if (!fortran) want = "True or False";
    } else if (key == "shape") {
      shape = std::get_if<Tuple>(&value);
      if (!shape) want = "a tuple";
    } else {
      return make_error(fmt::format("malformed header: unknown key '{}'", key));
    }
    if (want) return make_error(fmt::format("malformed header: '{}' must be {}", key, want));
  }
  for (auto [ok, name] :
       {std::pair{descr != nullptr, "descr"}, std::pair{fortran != nullptr, "fortran_order"},
        std::pair{shape != nullptr, "shape"}})
    if (!ok) return make_error(fmt::format("malformed header: missing key '{}'", name));
  auto dtype = dtype_of_descr(*descr);
  if (!dtype) return std::unexpected(dtype.error());
  return Header{*dtype, shape->items, *fortran};
}

}  // namespace

Expected<Header> parse_header(std::string_view text) {
  auto entries = Parser(text).dict();
  if (!entries) return make_error("malformed header: " + entries.error().message);
  return header_of(*entries);
}

std::string_view descr_of(DType dtype) {
  for (const DescrEntry& e : kDescrs)
    if (e.dtype == dtype) return e.descr;
  return {};
}

Expected<std::string> format_header(DType dtype, const ir::Shape& shape) {
  const std::string_view descr = descr_of(dtype);
  if (descr.empty())
    return make_error(
        fmt::format("{} has no numpy dtype and cannot be written to .npy", ir::dtype_name(dtype)));
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += fmt::format("{}{}", i ? ", " : "", shape[i]);
  if (shape.size() == 1) dims += ",";
  return fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
}

}  // namespace kiln::tools::npy
