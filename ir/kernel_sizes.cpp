// Run-time sizes: generalizing two kernels of one shape, and matching an instance.
#include "ir/kernel_sizes.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <tuple>
#include <utility>

namespace kiln::kir {

namespace {

// Walks `base` and `other` together and rebuilds base in a fresh arena, each number of base
// either fixed or a run-time size slot as `decide` says from the number at the same place of
// other (its value, or its slot where other has run-time sizes). Expressions are paired, not
// mapped one to one: two places that interning made one expression in one kernel may pair with
// two expressions of the other.
class Pairing {
 public:
  // A number: an i64 extent or constant, or a float constant as its double's bits (`real`).
  struct Number {
    int64_t value = 0;
    bool real = false;
  };
  // (base's number, other's number, other's slot or -1) -> the slot base's number becomes (-1:
  // fixed), or nullopt: the kernels do not pair.
  using Decide = std::function<std::optional<int32_t>(Number, Number, int32_t)>;

  // floats_alone: a pairing whose only slots are float constants makes a kernel with sizes.
  Pairing(const Kernel& base, const Kernel& other, bool floats_alone, Decide decide)
      : a_(base), b_(other), floats_alone_(floats_alone), decide_(std::move(decide)) {}

  std::optional<Kernel> run() {
    if (a_.dynamic_outer || b_.dynamic_outer || a_.params.size() != b_.params.size() ||
        a_.domain.size() != b_.domain.size() || a_.stores.size() != b_.stores.size())
      return std::nullopt;
    Kernel out;
    out.name = a_.name;
    out.arena = std::make_shared<ExprArena>();
    arena_ = out.arena.get();
    for (size_t i = 0; i < a_.params.size(); ++i) {
      const Param& pa = a_.params[i];
      const Param& pb = b_.params[i];
      if (pa.dtype != pb.dtype || pa.output != pb.output || pa.shape.size() != pb.shape.size())
        return std::nullopt;
      Param p = pa;
      p.shape_slots.clear();
      std::optional<std::vector<int32_t>> slots = extents(pa.shape, pb.shape, pb.shape_slots);
      if (!slots) return std::nullopt;
      p.shape_slots = std::move(*slots);
      out.params.push_back(std::move(p));
    }
    out.domain = a_.domain;
    std::optional<std::vector<int32_t>> domain_slots =
        extents(a_.domain, b_.domain, b_.domain_slots);
    if (!domain_slots) return std::nullopt;
    out.domain_slots = std::move(*domain_slots);
    for (size_t i = 0; i < a_.stores.size(); ++i) {
      const Store& sa = a_.stores[i];
      const Store& sb = b_.stores[i];
      if (sa.buf != sb.buf) return std::nullopt;
      const Expr* index = expr(sa.index, sb.index);
      const Expr* value = index ? expr(sa.value, sb.value) : nullptr;
      if (!value) return std::nullopt;
      out.stores.push_back(Store{sa.buf, index, value});
    }
    // Nothing at run time, or only float constants where they do not count: not a kernel with
    // sizes.
    if (values_.empty() || (!floats_alone_ && std::ranges::none_of(values_, [](const auto& v) {
          return !v.second.real;
        })))
      return std::nullopt;
    out.sizes.assign(values_.size(), 0);
    for (const auto& [slot, number] : values_) {
      if (slot < 0 || static_cast<size_t>(slot) >= out.sizes.size()) return std::nullopt;
      out.sizes[static_cast<size_t>(slot)] = number.value;
    }
    return out;
  }

 private:
  // A constant that may be a slot: an i64, or a finite f32 or f64 (a mean's 1/n) as its double's
  // bits; nullopt for any other expression.
  static std::optional<Number> slot_number(const Expr* e) {
    if (e->kind != ExprKind::Const || !size_dtype_ok(e->dtype)) return std::nullopt;
    if (e->dtype == DType::i64) return Number{e->ival};
    if (!std::isfinite(e->fval)) return std::nullopt;
    return Number{std::bit_cast<int64_t>(e->fval), true};
  }

  std::optional<int32_t> number(Number a, Number b, int32_t bslot) {
    std::optional<int32_t> slot = decide_(a, b, bslot);
    if (!slot || *slot < 0) return slot;
    auto [it, fresh] = values_.emplace(*slot, a);
    // One slot, one value, and one kind of number.
    if (!fresh && (it->second.value != a.value || it->second.real != a.real)) return std::nullopt;
    return slot;
  }

  // Per extent, its slot or -1; empty where every one is fixed.
  std::optional<std::vector<int32_t>> extents(const std::vector<int64_t>& a,
                                              const std::vector<int64_t>& b,
                                              const std::vector<int32_t>& bslots) {
    std::vector<int32_t> slots;
    bool any = false;
    for (size_t i = 0; i < a.size(); ++i) {
      std::optional<int32_t> s =
          number(Number{a[i]}, Number{b[i]}, i < bslots.size() ? bslots[i] : -1);
      if (!s) return std::nullopt;
      any = any || *s >= 0;
      slots.push_back(*s);
    }
    if (!any) slots.clear();
    return slots;
  }

  const Expr* expr(const Expr* a, const Expr* b) {
    if (auto it = memo_.find({a, b}); it != memo_.end()) return it->second;
    const Expr* out = build(a, b);
    memo_[{a, b}] = out;
    return out;
  }

  const Expr* build(const Expr* a, const Expr* b) {
    if (a->dtype != b->dtype) return nullptr;
    if (std::optional<Number> na = slot_number(a);
        na && (b->kind == ExprKind::Const || b->kind == ExprKind::Size)) {
      const bool slotted = b->kind == ExprKind::Size;
      std::optional<Number> nb = slotted ? Number{0, na->real} : slot_number(b);
      if (!nb) return nullptr;
      std::optional<int32_t> s = number(*na, *nb, slotted ? static_cast<int32_t>(b->ival) : -1);
      if (!s) return nullptr;
      if (*s >= 0) return arena_->size(*s, a->dtype);
      return a->dtype == DType::i64 ? arena_->index(a->ival) : arena_->constant(a->dtype, a->fval);
    }
    if (a->kind != b->kind || a->alu != b->alu || a->reduce_op != b->reduce_op ||
        a->var != b->var || a->buf != b->buf || a->args.size() != b->args.size() ||
        a->rvars != b->rvars)
      return nullptr;
    std::vector<const Expr*> args;
    for (size_t i = 0; i < a->args.size(); ++i) {
      const Expr* x = expr(a->args[i], b->args[i]);
      if (!x) return nullptr;
      args.push_back(x);
    }
    switch (a->kind) {
      case ExprKind::Const:  // not i64: equal values (floats by their bits)
        if (std::bit_cast<uint64_t>(a->fval) != std::bit_cast<uint64_t>(b->fval) ||
            a->ival != b->ival)
          return nullptr;
        return arena_->constant(a->dtype,
                                ir::is_float(a->dtype) ? a->fval : static_cast<double>(a->ival));
      case ExprKind::Var:
        return arena_->var(a->var);
      case ExprKind::Load:
        return arena_->load(a->buf, a->dtype, args[0]);
      case ExprKind::Alu:
        return arena_->alu(a->alu, a->dtype, std::move(args));
      case ExprKind::Reduce: {
        std::optional<std::vector<int32_t>> slots = extents(a->rextents, b->rextents, b->rslots);
        if (!slots || a->order != b->order) return nullptr;
        return arena_->reduce(a->reduce_op, a->dtype, args[0], a->rvars, a->rextents,
                              std::move(*slots), a->order);
      }
      case ExprKind::Scan:
        if (a->rextents != b->rextents) return nullptr;
        return a->rvars.empty() ? arena_->scan(a->reduce_op, a->dtype, args[0], a->var)
                                : arena_->select_scan(a->reduce_op, args[0], a->var, a->rvars[0],
                                                      a->rextents[0]);
      case ExprKind::Size:  // base kernels have fixed sizes
        return nullptr;
    }
    return nullptr;
  }

  const Kernel& a_;
  const Kernel& b_;
  bool floats_alone_ = false;
  Decide decide_;
  ExprArena* arena_ = nullptr;
  std::map<std::pair<const Expr*, const Expr*>, const Expr*> memo_;
  std::map<int32_t, Number> values_;  // slot -> base's number
};

}  // namespace

std::optional<Kernel> generalize(const Kernel& current, const Kernel& other, bool floats_alone) {
  if (current.has_sizes() || other.has_sizes()) return std::nullopt;
  // One slot per pair of numbers that differ, numbered in the order they are met.
  std::map<std::tuple<int64_t, int64_t, bool>, int32_t> slots;
  Pairing pairing(
      current, other, floats_alone,
      [&](Pairing::Number a, Pairing::Number b, int32_t) -> std::optional<int32_t> {
        if (a.value == b.value) return -1;
        return slots
            .emplace(std::tuple{a.value, b.value, a.real}, static_cast<int32_t>(slots.size()))
            .first->second;
      });
  return pairing.run();
}

std::string sizes_key(const Kernel& k) {
  const std::string text = print_kernel(k, /*with_labels=*/false);
  std::string out;
  out.reserve(text.size());
  auto word = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '%' ||
           c == '.';
  };
  for (size_t i = 0; i < text.size();) {
    if (std::isdigit(static_cast<unsigned char>(text[i])) && (i == 0 || !word(text[i - 1]))) {
      // The whole number: a float's fraction and exponent too (0.125, 1e-05).
      auto digits = [&] {
        while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
      };
      digits();
      if (i + 1 < text.size() && text[i] == '.' &&
          std::isdigit(static_cast<unsigned char>(text[i + 1]))) {
        ++i;
        digits();
      }
      if (i + 1 < text.size() && text[i] == 'e') {
        size_t j = i + 1;
        if (j < text.size() && (text[j] == '-' || text[j] == '+')) ++j;
        if (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) {
          i = j;
          digits();
        }
      }
      out += '#';
      continue;
    }
    out += text[i++];
  }
  return out;
}

std::optional<Kernel> match_sizes(const Kernel& general, const Kernel& k) {
  if (!general.has_sizes() || k.has_sizes()) return std::nullopt;
  const auto count = static_cast<int32_t>(general.sizes.size());
  Pairing pairing(
      k, general, /*floats_alone=*/true,
      [&](Pairing::Number value, Pairing::Number fixed, int32_t slot) -> std::optional<int32_t> {
        if (slot < 0) return value.value == fixed.value ? std::optional<int32_t>(-1) : std::nullopt;
        if (slot >= count) return std::nullopt;
        return slot;
      });
  std::optional<Kernel> out = pairing.run();
  if (!out || out->sizes.size() != general.sizes.size()) return std::nullopt;
  return out;
}

}  // namespace kiln::kir
