// ONNX's Einsum as kiln primitives: each operand's repeated labels become diagonals (a reshape
// and a strided slice), every operand is permuted and reshaped onto one shared label order (output
// labels, then contracted ones), the operands are multiplied with broadcasting and the contracted
// labels summed. The fuser makes the product and the sum one reduction kernel, so nothing the size
// of all labels together is ever stored; a two-operand contraction is the matmul pattern the CPU
// backend recognizes.
#include <algorithm>
#include <fmt/format.h>
#include <map>

#include "onnx/import_context.h"

namespace kiln::onnx {

namespace {

using ir::Node;
using ir::Op;

// A label: a letter, or one of the dimensions an ellipsis stands for (kEllipsis + position,
// right-aligned across operands as numpy broadcasts them).
constexpr int kEllipsis = 256;

struct Term {
  std::vector<int> labels;  // one per axis of its operand
};

// Parses one side of the equation ("bij", "...ii", "") for an operand of `rank` axes (or, for the
// output, `rank` = the ellipsis' width). `ellipsis_dims` is the widest ellipsis of the inputs.
Expected<Term> parse_term(Context& c, std::string_view s, int64_t rank, bool output, int64_t ellipsis_dims) {
  Term t;
  const size_t dots = s.find("...");
  if (dots != std::string_view::npos && s.find("...", dots + 3) != std::string_view::npos)
    return c.fail(fmt::format("term '{}' has more than one ellipsis", s));
  int64_t letters = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (ch == '.') {
      if (dots == std::string_view::npos || i < dots || i >= dots + 3)
        return c.fail(fmt::format("term '{}': a '.' that is not part of '...'", s));
      continue;
    }
    if (!std::isalpha(static_cast<unsigned char>(ch)))
      return c.fail(fmt::format("term '{}': '{}' is not a letter", s, ch));
    ++letters;
  }
  int64_t width = 0;
  if (dots != std::string_view::npos) {
    width = output ? ellipsis_dims : rank - letters;
    if (width < 0) return c.fail(fmt::format("term '{}' has more labels than its operand's {} axes", s, rank));
  } else if (!output && letters != rank) {
    return c.fail(fmt::format("term '{}' has {} labels for an operand of {} axes", s, letters, rank));
  }
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == dots) {
      for (int64_t k = 0; k < width; ++k) t.labels.push_back(kEllipsis + int(ellipsis_dims - width + k));
      i += 2;
      continue;
    }
    t.labels.push_back(static_cast<unsigned char>(s[i]));
  }
  return t;
}

// x with its axes `a` < `b` (equal labels) replaced by their diagonal, at axis `a`.
Expected<const Node*> diagonal(Context& c, const Node* x, size_t a, size_t b) {
  ir::Builder& B = c.b();
  const int64_t n = x->shape[a];
  if (x->shape[b] != n)
    return c.fail(fmt::format("a repeated label spans axes of {} and {} elements", n, x->shape[b]));
  std::vector<int64_t> perm;
  for (size_t d = 0; d < x->shape.size(); ++d)
    if (d != a && d != b) perm.push_back(int64_t(d));
  perm.push_back(int64_t(a));
  perm.push_back(int64_t(b));
  KILN_ONNX_TRY(x, c.check(B.permute(x, perm)));
  ir::Shape flat(x->shape.begin(), x->shape.end() - 2);
  flat.push_back(n * n);
  KILN_ONNX_TRY(x, c.check(B.reshape(x, flat)));
  KILN_ONNX_TRY(x, c.check(B.slice(x, int64_t(flat.size() - 1), 0, std::nullopt, n + 1)));
  // The diagonal is last; move it back to axis a.
  std::vector<int64_t> back;
  const int64_t last = int64_t(flat.size() - 1);
  for (int64_t d = 0; d < last; ++d) {
    if (d == int64_t(a)) back.push_back(last);
    back.push_back(d);
  }
  if (int64_t(a) == last) back.push_back(last);
  return c.check(B.permute(x, back));
}

Outs einsum(Context& c) {
  const AttributeProto* eq_attr = c.attr("equation");
  auto eq = c.attr_s("equation");
  if (!eq_attr || !eq) return c.fail("attribute 'equation' is missing");
  std::string equation;
  for (char ch : *eq)
    if (!std::isspace(static_cast<unsigned char>(ch))) equation += ch;
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != c.num_inputs())
    return c.fail(fmt::format("equation '{}' has {} terms for {} inputs", *eq, terms.size(), c.num_inputs()));
  std::vector<const Node*> xs;
  int64_t ellipsis_dims = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    KILN_ONNX_TRY(const Node* x, c.x(i));
    xs.push_back(x);
    int64_t letters = 0;
    for (char ch : terms[i]) letters += ch != '.';
    if (terms[i].find("...") != std::string::npos)
      ellipsis_dims = std::max<int64_t>(ellipsis_dims, int64_t(x->shape.size()) - letters);
  }
  std::vector<Term> parsed;
  std::map<int, int> count;  // label -> terms' occurrences
  for (size_t i = 0; i < terms.size(); ++i) {
    KILN_ONNX_TRY(Term t, parse_term(c, terms[i], int64_t(xs[i]->shape.size()), false, ellipsis_dims));
    for (int l : t.labels) ++count[l];
    parsed.push_back(std::move(t));
  }
  // The output: as written, or numpy's implicit one (the ellipsis, then the letters that occur
  // once, in alphabetical order).
  Term out;
  if (arrow != std::string::npos) {
    KILN_ONNX_TRY(out, parse_term(c, equation.substr(arrow + 2), 0, true, ellipsis_dims));
    for (size_t i = 0; i < out.labels.size(); ++i) {
      if (!count.contains(out.labels[i]))
        return c.fail(fmt::format("output label '{}' is in no input", char(out.labels[i])));
      if (std::count(out.labels.begin(), out.labels.end(), out.labels[i]) > 1)
        return c.fail(fmt::format("output label '{}' is repeated", char(out.labels[i])));
    }
  } else {
    for (int64_t k = 0; k < ellipsis_dims; ++k) out.labels.push_back(kEllipsis + int(k));
    for (const auto& [label, n] : count)
      if (label < kEllipsis && n == 1) out.labels.push_back(label);
  }
  // Every label's extent (ellipsis dimensions broadcast; letters must agree).
  std::map<int, int64_t> extent;
  ir::Builder& B = c.b();
  for (size_t i = 0; i < xs.size(); ++i) {
    // Repeated labels in one term: their diagonal.
    Term& t = parsed[i];
    for (bool again = true; again;) {
      again = false;
      for (size_t a = 0; a < t.labels.size() && !again; ++a)
        for (size_t b = a + 1; b < t.labels.size() && !again; ++b)
          if (t.labels[a] == t.labels[b]) {
            KILN_ONNX_TRY(xs[i], diagonal(c, xs[i], a, b));
            t.labels.erase(t.labels.begin() + long(b));
            again = true;
          }
    }
    for (size_t a = 0; a < t.labels.size(); ++a) {
      const int l = t.labels[a];
      const int64_t n = xs[i]->shape[a];
      auto [it, fresh] = extent.emplace(l, n);
      if (fresh || it->second == n) continue;
      if (l >= kEllipsis && (it->second == 1 || n == 1)) {
        it->second = std::max(it->second, n);
        continue;
      }
      return c.fail(fmt::format("label '{}' has extents {} and {}",
                                l >= kEllipsis ? std::string("...") : std::string(1, char(l)), it->second, n));
    }
  }
  // The shared order: output labels, then the contracted ones.
  std::vector<int> order = out.labels;
  for (const auto& [label, n] : extent)
    if (std::find(order.begin(), order.end(), label) == order.end()) order.push_back(label);
  const Node* product = nullptr;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Term& t = parsed[i];
    std::vector<int64_t> perm;
    ir::Shape shape;
    for (int l : order) {
      auto at = std::find(t.labels.begin(), t.labels.end(), l);
      if (at == t.labels.end()) {
        shape.push_back(1);
        continue;
      }
      perm.push_back(at - t.labels.begin());
      shape.push_back(xs[i]->shape[size_t(at - t.labels.begin())]);
    }
    KILN_ONNX_TRY(const Node* x, c.check(B.permute(xs[i], perm)));
    KILN_ONNX_TRY(x, c.check(B.reshape(x, std::vector<int64_t>(shape.begin(), shape.end()))));
    if (product) {
      KILN_ONNX_TRY(product, c.check(B.binary(Op::Mul, product, x)));
    } else {
      product = x;
    }
  }
  // Output labels only some operand broadcast (an ellipsis of 1s elsewhere) take their extent.
  ir::Shape full;
  for (int l : order) full.push_back(extent.at(l));
  if (product->shape != full) { KILN_ONNX_TRY(product, c.check(B.expand(product, full))); }
  if (order.size() == out.labels.size()) return std::vector<Value>{c.out(product)};
  std::vector<int64_t> contracted;
  for (size_t a = out.labels.size(); a < order.size(); ++a) contracted.push_back(int64_t(a));
  return one(c, B.reduce(Op::Sum, product, contracted, false));
}

}  // namespace

void add_einsum_ops(OpTable& t) { t["Einsum"] = einsum; }

}  // namespace kiln::onnx
