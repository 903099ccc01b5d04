// The `.kg` reader (DESIGN.md §4): statements to graph nodes through Builder::call, with
// "FILE:LINE:COL: error: WHAT" diagnostics.
#include <fmt/format.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>

#include "ir/kg.h"
#include "ir/builder_support.h"
#include "ir/kg_lexer.h"
#include "ir/kg_ops.h"

namespace kiln::ir {

namespace {

using Kind = KgToken::Kind;

// A position-carrying failure inside one line; the reader adds the file and line.
struct LineError {
  int col;
  std::string message;
};
template <class T>
using LineResult = std::expected<T, LineError>;

std::unexpected<LineError> fail(const KgToken& at, std::string message) {
  return std::unexpected(LineError{at.col, std::move(message)});
}

std::string describe(const KgToken& t) {
  return t.kind == Kind::End ? "end of line" : fmt::format("'{}'", t.text);
}

class Cursor {
 public:
  explicit Cursor(const std::vector<KgToken>& t) : t_(t) {}
  const KgToken& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const KgToken& next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  bool is(Kind k, std::string_view text = {}) const {
    return peek().kind == k && (text.empty() || peek().text == text);
  }
  LineResult<const KgToken*> expect(Kind k, std::string_view text, std::string_view what) {
    if (!is(k, text))
      return fail(peek(), fmt::format("expected {}, got {}", what, describe(peek())));
    return &next();
  }
  LineResult<void> expect_end() {
    if (!is(Kind::End))
      return fail(peek(), fmt::format("unexpected {} after the statement", describe(peek())));
    return {};
  }

 private:
  const std::vector<KgToken>& t_;
  size_t i_ = 0;
};

// An integer or floating literal token (a leading '+' allowed); `what` names it in the error.
template <class T>
LineResult<T> parse_number(const KgToken& t, std::string_view what) {
  std::string_view s = t.text;
  if (s.starts_with('+')) s.remove_prefix(1);
  T v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size())
    return fail(t, fmt::format("{} {} is out of range", what, t.text));
  return v;
}

// Integers up to 2^53 in magnitude are exact in a double.
constexpr int64_t kExactInDouble = int64_t{1} << 53;

LineResult<int64_t> parse_int(const KgToken& t) { return parse_number<int64_t>(t, "integer"); }
LineResult<double> parse_double(const KgToken& t) { return parse_number<double>(t, "number"); }

// The size symbols bound so far (`?b` in an input's type), by name.
using Symbols = std::map<std::string, int64_t, std::less<>>;

// `?name` (its '?' just read): the size the symbol stands for.
LineResult<int64_t> symbol_size(Cursor& c, const KgToken& mark, const Symbols& symbols) {
  const KgToken& name = c.next();
  if (name.kind != Kind::Ident)
    return fail(name, fmt::format("expected a size symbol's name after '?', got {}", describe(name)));
  auto it = symbols.find(name.text);
  if (it == symbols.end())
    return fail(mark, fmt::format("size symbol '?{}' is not defined (an input's type defines it, "
                                  "as in 'input %x : f32[?{},64]')",
                                  name.text, name.text));
  return it->second;
}

LineResult<std::vector<int64_t>> parse_int_list(Cursor& c, const Symbols& symbols) {
  c.next();  // '['
  std::vector<int64_t> out;
  if (c.is(Kind::Punct, "]")) {
    c.next();
    return out;
  }
  while (true) {
    const KgToken& t = c.next();
    if (t.kind == Kind::Punct && t.text == "?") {
      auto v = symbol_size(c, t, symbols);
      if (!v) return std::unexpected(v.error());
      out.push_back(*v);
    } else if (t.kind != Kind::Number || !t.is_int) {
      return fail(t, fmt::format("expected an integer in the list, got {}", describe(t)));
    } else {
      auto v = parse_int(t);
      if (!v) return std::unexpected(v.error());
      out.push_back(*v);
    }
    if (c.is(Kind::Punct, "]")) {
      c.next();
      return out;
    }
    if (auto r = c.expect(Kind::Punct, ",", "',' or ']' in the list"); !r)
      return std::unexpected(r.error());
  }
}

LineResult<AttrValue> parse_attr_value(Cursor& c, const Symbols& symbols) {
  const KgToken& t = c.peek();
  if (t.kind == Kind::Punct && t.text == "[") {
    auto list = parse_int_list(c, symbols);
    if (!list) return std::unexpected(list.error());
    return AttrValue(std::move(*list));
  }
  c.next();
  if (t.kind == Kind::Punct && t.text == "?") {
    auto v = symbol_size(c, t, symbols);
    if (!v) return std::unexpected(v.error());
    return AttrValue(*v);
  }
  if (t.kind == Kind::Number) {
    if (t.is_int) {
      auto v = parse_int(t);
      if (!v) return std::unexpected(v.error());
      return AttrValue(*v);
    }
    auto v = parse_double(t);
    if (!v) return std::unexpected(v.error());
    return AttrValue(*v);
  }
  if (t.kind == Kind::Ident) {
    if (t.text == "true" || t.text == "false") return AttrValue(t.text == "true");
    if (auto dt = parse_dtype(t.text)) return AttrValue(*dt);
    for (std::string_view k : kKgNameValues)
      if (t.text == k) return AttrValue(std::string(k));
  }
  return fail(
      t,
      fmt::format("expected an attribute value (a number, true, false, a dtype, a name or a list), got {}",
                  describe(t)));
}

class Reader {
 public:
  Reader(Graph& g, std::string_view file, const KgSizes* sizes, std::optional<int64_t> unsized)
      : g_(g), builder_(g), file_(file), given_(sizes), unsized_(unsized) {}
  Expected<KgGraph> run(std::string_view text);

 private:
  LineResult<void> statement(Cursor& c);
  LineResult<void> input(Cursor& c);
  LineResult<void> output(Cursor& c);
  LineResult<void> assignment(Cursor& c);
  // An input's dimensions: integers, or size symbols `?b` (sized by `?b=N`, the caller's sizes,
  // or an earlier input), whose names go to `symbols` (one per axis, "" for a number).
  LineResult<std::vector<int64_t>> dims(Cursor& c, std::vector<std::string>* symbols = nullptr);
  LineResult<const Node*> lookup(const KgToken& value) const;
  // `?name` or `?name=N` in an input's type (the '?' just read): the symbol and its size.
  LineResult<std::pair<std::string, int64_t>> symbol_dim(Cursor& c, const KgToken& mark);
  std::unexpected<Error> error_at(int line, int col, std::string_view message) const {
    return make_error(fmt::format("{}:{}:{}: error: {}", file_, line, col, message));
  }

  Graph& g_;
  Builder builder_;
  std::string_view file_;
  std::unordered_map<std::string, const Node*> values_;
  const KgSizes* given_;
  std::optional<int64_t> unsized_;  // a symbol's size where nothing gives one
  Symbols symbols_;
  KgGraph out_;
};

Expected<KgGraph> Reader::run(std::string_view text) {
  bool header_seen = false;
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? text.npos : nl - pos);
    ++line_no;
    auto tokens = lex_kg_line(line);
    if (!tokens) return error_at(line_no, tokens.error().col, tokens.error().message);
    Cursor c(*tokens);
    if (!c.is(Kind::End)) {
      if (!header_seen) {
        if (c.is(Kind::Ident, "kiln.graph") && c.peek(1).kind == Kind::Ident &&
            c.peek(1).text != "v1")
          return error_at(
              line_no, c.peek(1).col,
              fmt::format("unsupported version '{}' (expected 'kiln.graph v1')", c.peek(1).text));
        if (!c.is(Kind::Ident, "kiln.graph") || c.peek(1).text != "v1" ||
            c.peek(2).kind != Kind::End)
          return error_at(line_no, c.peek().col, "expected header 'kiln.graph v1'");
        header_seen = true;
      } else if (auto r = statement(c); !r) {
        return error_at(line_no, r.error().col, r.error().message);
      }
    }
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  if (!header_seen) return error_at(1, 1, "expected header 'kiln.graph v1'");
  if (out_.outputs.empty()) {
    // Point just past the last character: that is where the missing statement belongs.
    size_t last_nl = text.rfind('\n');
    int col = static_cast<int>(text.size() - (last_nl == text.npos ? 0 : last_nl + 1)) + 1;
    return error_at(line_no, col, "expected at least one 'output' statement");
  }
  return std::move(out_);
}

LineResult<void> Reader::statement(Cursor& c) {
  if (c.is(Kind::Ident, "input")) return input(c);
  if (c.is(Kind::Ident, "output")) return output(c);
  if (c.is(Kind::Value)) return assignment(c);
  return fail(c.peek(),
              fmt::format("expected a statement ('input', 'output' or '%name = op(...)'), "
                          "got {}",
                          describe(c.peek())));
}

LineResult<const Node*> Reader::lookup(const KgToken& value) const {
  auto it = values_.find(std::string(value.text.substr(1)));
  if (it == values_.end()) return fail(value, fmt::format("undefined value '{}'", value.text));
  return it->second;
}

LineResult<std::vector<int64_t>> Reader::dims(Cursor& c, std::vector<std::string>* symbols) {
  if (auto r = c.expect(Kind::Punct, "[", "'[' and the dimensions"); !r)
    return std::unexpected(r.error());
  std::vector<int64_t> out;
  if (c.is(Kind::Punct, "]")) {
    c.next();
    return out;
  }
  while (true) {
    const KgToken& t = c.next();
    if (symbols && t.kind == Kind::Punct && t.text == "?") {
      auto size = symbol_dim(c, t);
      if (!size) return std::unexpected(size.error());
      symbols->resize(out.size());
      symbols->push_back(size->first);
      out.push_back(size->second);
    } else {
      auto v = t.kind == Kind::Number && t.is_int ? parse_int(t) : fail(t, "");
      if (!v || *v < 0)
        return fail(t, fmt::format("expected a non-negative integer dimension{}, got {}",
                                   symbols ? " or a size symbol '?b'" : "", describe(t)));
      out.push_back(*v);
    }
    if (c.is(Kind::Punct, "]")) {
      c.next();
      return out;
    }
    if (auto r = c.expect(Kind::Punct, ",", "',' or ']' in the dimensions"); !r)
      return std::unexpected(r.error());
  }
}

LineResult<std::pair<std::string, int64_t>> Reader::symbol_dim(Cursor& c, const KgToken& mark) {
  const KgToken& name = c.next();
  if (name.kind != Kind::Ident)
    return fail(name, fmt::format("expected a size symbol's name after '?', got {}", describe(name)));
  std::optional<int64_t> size;
  if (c.is(Kind::Punct, "=")) {
    c.next();
    const KgToken& t = c.next();
    auto v = t.kind == Kind::Number && t.is_int ? parse_int(t) : fail(t, "");
    if (!v || *v < 0)
      return fail(t, fmt::format("expected the size of '?{}', a non-negative integer, got {}", name.text,
                                 describe(t)));
    size = *v;
  }
  // The caller's size wins over the file's example size; a symbol sized already keeps its size.
  if (given_)
    if (auto it = given_->find(std::string(name.text)); it != given_->end()) size = it->second;
  auto known = symbols_.find(name.text);
  if (known != symbols_.end()) {
    if (size && *size != known->second && !(given_ && given_->contains(std::string(name.text))))
      return fail(mark, fmt::format("size symbol '?{}' is {} here but {} where it was first given",
                                    name.text, *size, known->second));
    return std::pair{std::string(name.text), known->second};
  }
  if (!size) size = unsized_;
  if (!size)
    return fail(mark, fmt::format("size symbol '?{}' has no size: write '?{}=N' in the file, or "
                                  "give it when reading (kiln run --dim {}=N)",
                                  name.text, name.text, name.text));
  symbols_.emplace(std::string(name.text), *size);
  out_.sizes.emplace_back(std::string(name.text), *size);
  return std::pair{std::string(name.text), *size};
}

LineResult<void> Reader::input(Cursor& c) {
  c.next();
  auto name = c.expect(Kind::Value, {}, "a value name like '%x'");
  if (!name) return std::unexpected(name.error());
  std::string key((*name)->text.substr(1));
  if (values_.contains(key))
    return fail(**name, fmt::format("value '{}' is already defined", (*name)->text));
  if (auto r = c.expect(Kind::Punct, ":", "':' and the input's type"); !r)
    return std::unexpected(r.error());
  const KgToken& dt_tok = c.next();
  auto dt = dt_tok.kind == Kind::Ident ? parse_dtype(dt_tok.text) : std::nullopt;
  if (!dt)
    return fail(dt_tok,
                fmt::format("expected a dtype (f32 f64 f16 bf16 i32 i64 i8 u8 bool), got {}",
                            describe(dt_tok)));
  std::vector<std::string> symbols;
  auto shape = dims(c, &symbols);
  if (!shape) return std::unexpected(shape.error());
  if (auto r = c.expect_end(); !r) return r;
  if (auto fits = detail::check_numel("input", *shape); !fits)
    return fail(**name, fits.error().message);
  symbols.resize(shape->size());
  const Node* n = g_.input(*dt, std::move(*shape), key, input_symbols_attr(symbols));
  values_.emplace(key, n);
  out_.inputs.emplace_back(std::move(key), n);
  return {};
}

LineResult<void> Reader::output(Cursor& c) {
  c.next();
  auto name = c.expect(Kind::Value, {}, "a value name like '%y'");
  if (!name) return std::unexpected(name.error());
  auto node = lookup(**name);
  if (!node) return std::unexpected(node.error());
  std::string key((*name)->text.substr(1));
  for (const auto& [k, n] : out_.outputs)
    if (k == key) return fail(**name, fmt::format("output '{}' is already listed", (*name)->text));
  if (auto r = c.expect_end(); !r) return r;
  out_.outputs.emplace_back(std::move(key), *node);
  return {};
}

LineResult<void> Reader::assignment(Cursor& c) {
  const KgToken& name = c.next();
  std::string key(name.text.substr(1));
  if (values_.contains(key))
    return fail(name, fmt::format("value '{}' is already defined", name.text));
  if (auto r = c.expect(Kind::Punct, "=", "'=' after the value name"); !r)
    return std::unexpected(r.error());
  auto op = c.expect(Kind::Ident, {}, "an op name");
  if (!op) return std::unexpected(op.error());
  if (auto r = c.expect(Kind::Punct, "(", fmt::format("'(' after '{}'", (*op)->text)); !r)
    return std::unexpected(r.error());
  std::vector<Operand> args;
  std::vector<NamedAttr> attrs;
  bool closed = c.is(Kind::Punct, ")");
  while (!closed) {
    const KgToken& t = c.next();
    bool is_attr = t.kind == Kind::Ident && c.is(Kind::Punct, "=");
    if (is_attr) {
      c.next();
      for (const auto& [k, v] : attrs)
        if (k == t.text) return fail(t, fmt::format("attribute '{}' is given twice", t.text));
      auto v = parse_attr_value(c, symbols_);
      if (!v) return std::unexpected(v.error());
      attrs.emplace_back(std::string(t.text), std::move(*v));
    } else if (!attrs.empty() && (t.kind == Kind::Value || t.kind == Kind::Number)) {
      return fail(t, "operands must come before the attributes");
    } else if (t.kind == Kind::Value) {
      auto n = lookup(t);
      if (!n) return std::unexpected(n.error());
      args.emplace_back(*n);
    } else if (auto whole = t.kind == Kind::Number && t.is_int ? parse_int(t) : fail(t, "");
               whole && (*whole > kExactInDouble || *whole < -kExactInDouble)) {
      args.emplace_back(*whole);  // past 2^53: an i64 operand takes it whole
    } else if (t.kind == Kind::Number) {
      auto v = parse_double(t);
      if (!v) return std::unexpected(v.error());
      args.emplace_back(*v);
    } else {
      return fail(t, fmt::format("expected an operand ('%x' or a number) or 'key=value', got {}",
                                 describe(t)));
    }
    closed = c.is(Kind::Punct, ")");
    if (!closed)
      if (auto r = c.expect(Kind::Punct, ",", "',' or ')'"); !r) return std::unexpected(r.error());
  }
  c.next();  // ')'
  if (auto r = c.expect_end(); !r) return r;
  auto node = call_kg(builder_, (*op)->text, args, attrs);
  if (!node) return fail(**op, node.error().message);
  out_.values.emplace_back(key, *node);
  values_.emplace(std::move(key), *node);
  return {};
}

}  // namespace

Expected<KgGraph> read_kg(Graph& g, std::string_view text, std::string_view filename,
                          const KgSizes* sizes, std::optional<int64_t> unsized) {
  return Reader(g, filename, sizes, unsized).run(text);
}

Expected<std::string> read_text_file(const std::string& path, uint64_t stream_limit) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return make_error(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closing(f, std::fclose);
  struct stat st {};
  if (::fstat(::fileno(f), &st) != 0)
    return make_error(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode))
    return make_error(fmt::format("cannot read '{}': it is a directory", path));
  // A regular file is read whole; a pipe or a device (which may never end: /dev/zero) up to
  // `stream_limit` bytes.
  const bool regular = S_ISREG(st.st_mode);
  std::string text;
  if (regular) text.reserve(static_cast<size_t>(st.st_size));
  char buf[65536];
  size_t got = 0;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) {
    text.append(buf, got);
    if (!regular && text.size() > stream_limit)
      return make_error(
          fmt::format("cannot read '{}': it is not a regular file and goes on past {} bytes", path,
                      stream_limit));
  }
  if (std::ferror(f))
    return make_error(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  return text;
}

std::optional<KgSizes> second_reading_sizes(const KgGraph& graph) {
  const bool inner = std::ranges::any_of(graph.inputs, [](const NamedNode& input) {
    const std::vector<std::string> symbols = input_symbols(*input.second);
    return std::any_of(symbols.begin() + std::min<size_t>(1, symbols.size()), symbols.end(),
                       [](const std::string& s) { return !s.empty(); });
  });
  if (!inner) return std::nullopt;
  // Each symbol a step further than the one before: two symbols of one size at the first reading
  // differ at the second, so no kernel takes them for one size.
  KgSizes sizes;
  int64_t step = 1;
  for (const auto& [symbol, size] : graph.sizes) sizes.emplace(symbol, size + step++);
  return sizes;
}

Expected<KgGraph> read_kg_file(Graph& g, const std::string& path, const KgSizes* sizes) {
  auto text = read_text_file(path);
  if (!text) return std::unexpected(text.error());
  return read_kg(g, *text, path, sizes);
}

}  // namespace kiln::ir
