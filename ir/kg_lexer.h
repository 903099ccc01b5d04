// Tokens of one `.kg` line, with their columns, for the reader.
#pragma once

#include <expected>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::ir {

struct KgToken {
  enum class Kind : uint8_t {
    Ident,   // op names, keywords, attribute keys, dtypes, true/false
    Value,   // %name (text includes the '%')
    Number,  // 3, -1, 1.5, 1e-5, inf, -inf, nan
    Punct,   // one of ( ) [ ] , = :
    End,     // end of line (or a '#' comment)
  };
  Kind kind;
  std::string_view text;
  int col;              // 1-based byte column
  bool is_int = false;  // Number written without '.', exponent, inf or nan
};

struct KgLexError {
  std::string message;
  int col;
};

// Splits one line into tokens, always ending with an End token.
std::expected<std::vector<KgToken>, KgLexError> lex_kg_line(std::string_view line);

}  // namespace kiln::ir
