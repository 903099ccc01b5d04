// The `.kg` reader (DESIGN.md §4): statements to graph nodes through Builder::call, with
// "FILE:LINE:COL: error: WHAT" diagnostics.
#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
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

LineResult<int64_t> parse_int(const KgToken& t) { return parse_number<int64_t>(t, "integer"); }
LineResult<double> parse_double(const KgToken& t) { return parse_number<double>(t, "number"); }

LineResult<std::vector<int64_t>> parse_int_list(Cursor& c) {
  c.next();  // '['
  std::vector<int64_t> out;
  if (c.is(Kind::Punct, "]")) {
    c.next();
    return out;
  }
  while (true) {
    const KgToken& t = c.next();
    if (t.kind != Kind::Number || !t.is_int)
      return fail(t, fmt::format("expected an integer in the list, got {}", describe(t)));
    auto v = parse_int(t);
    if (!v) return std::unexpected(v.error());
    out.push_back(*v);
    if (c.is(Kind::Punct, "]")) {
      c.next();
      return out;
    }
    if (auto r = c.expect(Kind::Punct, ",", "',' or ']' in the list"); !r)
      return std::unexpected(r.error());
  }
}

LineResult<AttrValue> parse_attr_value(Cursor& c) {
  const KgToken& t = c.peek();
  if (t.kind == Kind::Punct && t.text == "[") {
    auto list = parse_int_list(c);
    if (!list) return std::unexpected(list.error());
    return AttrValue(std::move(*list));
  }
  c.next();
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
  Reader(Graph& g, std::string_view file) : g_(g), builder_(g), file_(file) {}
  Expected<KgGraph> run(std::string_view text);

 private:
  LineResult<void> statement(Cursor& c);
  LineResult<void> input(Cursor& c);
  LineResult<void> output(Cursor& c);
  LineResult<void> assignment(Cursor& c);
  LineResult<std::vector<int64_t>> dims(Cursor& c);
  LineResult<const Node*> lookup(const KgToken& value) const;
  std::unexpected<Error> error_at(int line, int col, std::string_view message) const {
    return make_error(fmt::format("{}:{}:{}: error: {}", file_, line, col, message));
  }

  Graph& g_;
  Builder builder_;
  std::string_view file_;
  std::unordered_map<std::string, const Node*> values_;
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

LineResult<std::vector<int64_t>> Reader::dims(Cursor& c) {
  if (auto r = c.expect(Kind::Punct, "[", "'[' and the dimensions"); !r)
    return std::unexpected(r.error());
  std::vector<int64_t> out;
  if (c.is(Kind::Punct, "]")) {
    c.next();
    return out;
  }
  while (true) {
    const KgToken& t = c.next();
    auto v = t.kind == Kind::Number && t.is_int ? parse_int(t) : fail(t, "");
    if (!v || *v < 0)
      return fail(t, fmt::format("expected a non-negative integer dimension, got {}", describe(t)));
    out.push_back(*v);
    if (c.is(Kind::Punct, "]")) {
      c.next();
      return out;
    }
    if (auto r = c.expect(Kind::Punct, ",", "',' or ']' in the dimensions"); !r)
      return std::unexpected(r.error());
  }
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
  auto shape = dims(c);
  if (!shape) return std::unexpected(shape.error());
  if (auto r = c.expect_end(); !r) return r;
  if (auto fits = detail::check_numel("input", *shape); !fits)
    return fail(**name, fits.error().message);
  const Node* n = g_.input(*dt, std::move(*shape), key);
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
      auto v = parse_attr_value(c);
      if (!v) return std::unexpected(v.error());
      attrs.emplace_back(std::string(t.text), std::move(*v));
    } else if (!attrs.empty() && (t.kind == Kind::Value || t.kind == Kind::Number)) {
      return fail(t, "operands must come before the attributes");
    } else if (t.kind == Kind::Value) {
      auto n = lookup(t);
      if (!n) return std::unexpected(n.error());
      args.emplace_back(*n);
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

Expected<KgGraph> read_kg(Graph& g, std::string_view text, std::string_view filename) {
  return Reader(g, filename).run(text);
}

Expected<KgGraph> read_kg_file(Graph& g, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return make_error(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  std::string text;
  char buf[65536];
  size_t got = 0;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, got);
  int err = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (err) return make_error(fmt::format("cannot read '{}': {}", path, std::strerror(err)));
  return read_kg(g, text, path);
}

}  // namespace kiln::ir
