// Tokenizer for one line of a `.kg` file.
#include "ir/kg_lexer.h"

#include <cctype>
#include <string>
#include <string_view>

namespace kiln::ir {

namespace {

// The character at `at` as an error shows it: an ASCII one quoted, a whole UTF-8 sequence quoted
// (a byte of it alone would print as half a character), and a control byte or a byte that starts
// no valid sequence (a binary file) as \xNN, so that the message stays valid text.
std::string shown_character(std::string_view line, size_t at) {
  const auto c = static_cast<unsigned char>(line[at]);
  const auto byte = [](unsigned char b) {
    static constexpr char kHex[] = "0123456789abcdef";
    return std::string("\\x") + kHex[b >> 4] + kHex[b & 15];
  };
  if (c >= 0x80) {
    const size_t n = c >= 0xC2 && c <= 0xDF   ? 2
                     : c >= 0xE0 && c <= 0xEF ? 3
                     : c >= 0xF0 && c <= 0xF4 ? 4
                                              : 0;
    bool whole = n != 0 && at + n <= line.size();
    for (size_t k = 1; whole && k < n; ++k)
      whole = (static_cast<unsigned char>(line[at + k]) & 0xC0) == 0x80;
    if (!whole) return byte(c) + " (not text: is this a .kg file?)";
    return "'" + std::string(line.substr(at, n)) + "' (names, ops and numbers are ASCII)";
  }
  if (c < 0x20 || c == 0x7f) return byte(c);
  return "'" + std::string(1, static_cast<char>(c)) + "'";
}

}  // namespace

namespace {

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Length of the number at the start of `s` (after any sign), or 0; sets `is_int`.
size_t number_length(std::string_view s, bool& is_int) {
  is_int = false;
  if (s.starts_with("inf") || s.starts_with("nan")) return 3;
  size_t i = 0;
  while (i < s.size() && is_digit(s[i])) ++i;
  size_t int_digits = i;
  bool fraction = i < s.size() && s[i] == '.';
  if (fraction) {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  if (i == (fraction ? 1u : 0u)) return 0;  // no digits at all
  bool exponent = i < s.size() && (s[i] == 'e' || s[i] == 'E');
  if (exponent) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    size_t digits_start = j;
    while (j < s.size() && is_digit(s[j])) ++j;
    if (j == digits_start) return i;  // "1e": the caller sees a trailing letter and rejects it
    i = j;
  }
  is_int = !fraction && !exponent && int_digits > 0;
  return i;
}

}  // namespace

std::expected<std::vector<KgToken>, KgLexError> lex_kg_line(std::string_view line) {
  std::vector<KgToken> out;
  size_t i = 0;
  auto col = [&](size_t at) { return static_cast<int>(at) + 1; };
  while (i < line.size()) {
    char c = line[i];
    if (c == '#') break;
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    size_t start = i;
    if (c == '(' || c == ')' || c == '[' || c == ']' || c == ',' || c == '=' || c == ':' || c == '?') {
      out.push_back({KgToken::Kind::Punct, line.substr(i, 1), col(i)});
      ++i;
      continue;
    }
    if (c == '%') {
      ++i;
      while (i < line.size() && is_word_char(line[i])) ++i;
      if (i == start + 1)
        return std::unexpected(KgLexError{"expected a value name after '%'", col(start)});
      out.push_back({KgToken::Kind::Value, line.substr(start, i - start), col(start)});
      continue;
    }
    bool sign = c == '-' || c == '+';
    bool is_int = false;
    size_t len = number_length(line.substr(i + (sign ? 1 : 0)), is_int);
    bool leads_number = is_digit(c) || c == '.' || (sign && len > 0);
    if (leads_number) {
      i += (sign ? 1 : 0) + len;
      while (i < line.size() && is_word_char(line[i])) ++i;
      std::string_view text = line.substr(start, i - start);
      bool whole = text.size() == (sign ? 1 : 0) + len;
      if (len == 0 || !whole)
        return std::unexpected(
            KgLexError{"invalid number '" + std::string(text) + "'", col(start)});
      out.push_back({KgToken::Kind::Number, text, col(start), is_int});
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (i < line.size() && is_word_char(line[i])) ++i;
      std::string_view text = line.substr(start, i - start);
      bool special = text == "inf" || text == "nan";
      out.push_back({special ? KgToken::Kind::Number : KgToken::Kind::Ident, text, col(start)});
      continue;
    }
    return std::unexpected(
        KgLexError{"unexpected character " + shown_character(line, start), col(start)});
  }
  out.push_back({KgToken::Kind::End, std::string_view{}, col(i)});
  return out;
}

}  // namespace kiln::ir
