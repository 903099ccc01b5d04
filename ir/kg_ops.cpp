// The `.kg` op table and Builder::call: operand counts, attribute validation and defaults, literal
// operands, and dispatch to the checked constructors.
#include "ir/kg_ops.h"

#include <algorithm>
#include <cmath>

#include "ir/builder_support.h"

namespace kiln::ir {

namespace {

using detail::op_error;
using T = KgAttrType;

constexpr KgAttrSpec kCast[] = {{"to", T::DType, true}};
constexpr KgAttrSpec kReduce[] = {{"axes", T::Ints, false}, {"keepdim", T::Bool, false}};
constexpr KgAttrSpec kArgReduce[] = {{"axis", T::Int, true}, {"keepdim", T::Bool, false}};
constexpr KgAttrSpec kCumSum[] = {
    {"axis", T::Int, true}, {"exclusive", T::Bool, false}, {"reverse", T::Bool, false}};
constexpr KgAttrSpec kTopK[] = {
    {"k", T::Int, true}, {"axis", T::Int, false}, {"largest", T::Bool, false}};
constexpr KgAttrSpec kShape[] = {{"shape", T::Ints, true}};
constexpr KgAttrSpec kDims[] = {{"dims", T::Ints, true}};
constexpr KgAttrSpec kSlice[] = {{"axis", T::Int, true},
                                 {"start", T::Int, false},
                                 {"end", T::Int, false},
                                 {"step", T::Int, false}};
constexpr KgAttrSpec kPad[] = {
    {"before", T::Ints, true}, {"after", T::Ints, true}, {"value", T::Float, false}};
constexpr KgAttrSpec kAxis[] = {{"axis", T::Int, true}};
constexpr KgAttrSpec kTrilu[] = {{"k", T::Int, false}, {"upper", T::Bool, false}};
constexpr KgAttrSpec kScatter[] = {{"axis", T::Int, true}, {"reduction", T::Name, false}};
constexpr KgAttrSpec kResize[] = {
    {"axis", T::Int, true},         {"size", T::Int, true},          {"mode", T::Name, false},
    {"coord", T::Name, false},      {"nearest", T::Name, false},     {"scale", T::Float, false},
    {"roi_start", T::Float, false}, {"roi_end", T::Float, false},    {"cubic_a", T::Float, false},
    {"exclude_outside", T::Bool, false}, {"antialias", T::Bool, false}, {"value", T::Float, false}};
constexpr KgAttrSpec kFlip[] = {{"axes", T::Ints, true}};
constexpr KgAttrSpec kRoll[] = {{"shifts", T::Ints, true}, {"axes", T::Ints, true}};
constexpr KgAttrSpec kUnfold[] = {
    {"dim", T::Int, true}, {"size", T::Int, true}, {"step", T::Int, true}};
constexpr KgAttrSpec kFull[] = {
    {"shape", T::Ints, true}, {"value", T::Float, true}, {"dtype", T::DType, false}};
constexpr KgAttrSpec kArange[] = {{"start", T::Int, false},
                                  {"end", T::Int, true},
                                  {"step", T::Int, false},
                                  {"dtype", T::DType, false}};
constexpr KgAttrSpec kSoftmax[] = {{"axis", T::Int, false}};
constexpr KgAttrSpec kLayernorm[] = {{"axis", T::Int, false}, {"eps", T::Float, false}};
constexpr KgAttrSpec kAttention[] = {{"causal", T::Bool, false}, {"scale", T::Float, false}};

using Xs = std::vector<const Node*>;

NodeResult h_unary(Builder& b, const KgOpSpec& s, const Xs& x, const KgAttrs&) {
  return b.unary(s.op, x[0]);
}
NodeResult h_binary(Builder& b, const KgOpSpec& s, const Xs& x, const KgAttrs&) {
  return b.binary(s.op, x[0], x[1]);
}
NodeResult h_where(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs&) {
  return b.where(x[0], x[1], x[2]);
}
NodeResult h_cast(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.cast(x[0], a.dt("to", DType::f32));
}
NodeResult h_reduce(Builder& b, const KgOpSpec& s, const Xs& x, const KgAttrs& a) {
  return b.reduce(s.op, x[0], a.ints("axes"), a.b("keepdim", false));
}
NodeResult h_mean(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.mean(x[0], a.ints("axes"), a.b("keepdim", false));
}
NodeResult h_arg_reduce(Builder& b, const KgOpSpec& s, const Xs& x, const KgAttrs& a) {
  return b.arg_reduce(s.op, x[0], a.i("axis", 0), a.b("keepdim", false));
}
NodeResult h_cumsum(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.cumsum(x[0], a.i("axis", 0), a.b("exclusive", false), a.b("reverse", false));
}
NodeResult h_topk_indices(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.topk_indices(x[0], a.i("k", 0), a.i("axis", -1), a.b("largest", true));
}
NodeResult h_reshape(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.reshape(x[0], *a.ints("shape"));
}
NodeResult h_permute(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.permute(x[0], *a.ints("dims"));
}
NodeResult h_expand(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.expand(x[0], *a.ints("shape"));
}
NodeResult h_slice(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.slice(x[0], a.i("axis", 0), a.opt_i("start"), a.opt_i("end"), a.i("step", 1));
}
NodeResult h_pad(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.pad(x[0], *a.ints("before"), *a.ints("after"), a.f("value", 0.0));
}
NodeResult h_concat(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.concat(x, a.i("axis", 0));
}
NodeResult h_flip(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.flip(x[0], *a.ints("axes"));
}
NodeResult h_roll(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.roll(x[0], *a.ints("shifts"), *a.ints("axes"));
}
NodeResult h_unfold(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.unfold(x[0], a.i("dim", 0), a.i("size", 0), a.i("step", 1));
}
NodeResult h_gather(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.gather(x[0], x[1], a.i("axis", 0));
}
NodeResult h_gather_elements(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.gather_elements(x[0], x[1], a.i("axis", 0));
}
NodeResult h_trilu(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.trilu(x[0], a.i("k", 0), a.b("upper", true));
}
// Defaults: ONNX Resize's (nearest, half_pixel, round_prefer_floor, cubic_a -0.75, the whole
// axis as roi) and scale = size / the axis's length.
NodeResult h_resize(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  KILN_IR_TRY(const int64_t axis, detail::normalize_one_axis("resize", a.i("axis", 0), x[0]->shape));
  ResizeAxis r;
  r.in = x[0]->shape[static_cast<size_t>(axis)];
  r.out = a.i("size", 0);
  KILN_IR_TRY(r.mode, parse_resize_mode(a.name("mode", "nearest")));
  KILN_IR_TRY(r.coord, parse_resize_coord(a.name("coord", "half_pixel")));
  KILN_IR_TRY(r.nearest, parse_resize_nearest(a.name("nearest", "round_prefer_floor"), true));
  r.scale = a.opt_f("scale").value_or(r.in > 0 ? double(r.out) / double(r.in) : 1.0);
  r.roi_start = a.f("roi_start", 0.0);
  r.roi_end = a.f("roi_end", 1.0);
  r.cubic_a = a.f("cubic_a", -0.75);
  r.exclude_outside = a.b("exclude_outside", false);
  r.antialias = a.b("antialias", false);
  return b.resize(x[0], axis, r, a.f("value", 0.0));
}

NodeResult h_scatter_elements(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.scatter_elements(x[0], x[1], x[2], a.i("axis", 0), a.name("reduction", "none"));
}
NodeResult h_matmul(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs&) {
  return b.matmul(x[0], x[1]);
}
NodeResult h_full(Builder& b, const KgOpSpec&, const Xs&, const KgAttrs& a) {
  const DType t = a.dt("dtype", DType::f32);
  // An integer literal exactly (an i64 past 2^53 keeps every bit).
  if (const AttrValue* v = a.find("value"); v && std::holds_alternative<int64_t>(*v))
    return b.full_int(*a.ints("shape"), std::get<int64_t>(*v), t);
  return b.full(*a.ints("shape"), a.f("value", 0.0), t);
}
NodeResult h_arange(Builder& b, const KgOpSpec&, const Xs&, const KgAttrs& a) {
  return b.arange(a.i("start", 0), a.i("end", 0), a.i("step", 1), a.dt("dtype", DType::i32));
}
NodeResult h_clip(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs&) {
  return b.clip(x[0], x[1], x[2]);
}
NodeResult h_softmax(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.softmax(x[0], a.i("axis", -1));
}
NodeResult h_log_softmax(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.log_softmax(x[0], a.i("axis", -1));
}
NodeResult h_layernorm(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.layernorm(x[0], x[1], x[2], a.i("axis", -1), a.f("eps", 1e-5));
}
NodeResult h_attention(Builder& b, const KgOpSpec&, const Xs& x, const KgAttrs& a) {
  return b.attention(x[0], x[1], x[2], a.b("causal", false), a.opt_f("scale"));
}

// The `.kg` attributes and constructor of each primitive that is not a plain unary, binary or
// ternary elementwise op. Names and operand counts come from kiln/ops.def.
struct PrimitiveCall {
  Op op;
  std::span<const KgAttrSpec> attrs;
  KgHandler handler;
};
constexpr PrimitiveCall kPrimitiveCalls[] = {
    {Op::Cast, kCast, h_cast},          {Op::Sum, kReduce, h_reduce},
    {Op::ReduceMax, kReduce, h_reduce}, {Op::ReduceMin, kReduce, h_reduce},
    {Op::Prod, kReduce, h_reduce},      {Op::ArgMax, kArgReduce, h_arg_reduce},
    {Op::ArgMin, kArgReduce, h_arg_reduce}, {Op::Reshape, kShape, h_reshape},
    {Op::Permute, kDims, h_permute},    {Op::Expand, kShape, h_expand},
    {Op::Slice, kSlice, h_slice},       {Op::Pad, kPad, h_pad},
    {Op::Concat, kAxis, h_concat},      {Op::Flip, kFlip, h_flip},
    {Op::Roll, kRoll, h_roll},          {Op::Unfold, kUnfold, h_unfold},
    {Op::Gather, kAxis, h_gather},      {Op::GatherElements, kAxis, h_gather_elements},
    {Op::Trilu, kTrilu, h_trilu},      {Op::Matmul, {}, h_matmul},         {Op::Full, kFull, h_full},
    {Op::Arange, kArange, h_arange},
    {Op::CumSum, kCumSum, h_cumsum},
    {Op::TopKIndices, kTopK, h_topk_indices},
    {Op::ScatterElements, kScatter, h_scatter_elements},
    {Op::Clip, {}, h_clip},
    {Op::Resize, kResize, h_resize},
};

// Every op of kiln/ops.def but Input (graph files declare inputs with `input`, not a call).
KgOpSpec primitive_spec(Op op) {
  const int arity = op_arity(op);
  KgOpSpec s{op_name(op), op, arity < 0 ? 1 : arity, arity, {}, nullptr, true};
  for (const PrimitiveCall& c : kPrimitiveCalls)
    if (c.op == op) s.attrs = c.attrs, s.handler = c.handler;
  if (!s.handler && is_elementwise(op))
    s.handler = arity == 1 ? h_unary : arity == 2 ? h_binary : h_where;
  KILN_CHECK(s.handler) << "no .kg call for op " << op_enum_name(op);
  return s;
}

const std::vector<KgOpSpec>& table() {
  static const std::vector<KgOpSpec> t = [] {
    std::vector<KgOpSpec> v;
    for (int i = 0; i < kOpCount; ++i)
      if (static_cast<Op>(i) != Op::Input) v.push_back(primitive_spec(static_cast<Op>(i)));
    v.insert(v.end(), {
                          {"mean", Op::Sum, 1, 1, kReduce, h_mean, false},
                          {"softmax", Op::Sum, 1, 1, kSoftmax, h_softmax, false},
                          {"log_softmax", Op::Sum, 1, 1, kSoftmax, h_log_softmax, false},
                          {"layernorm", Op::Sum, 3, 3, kLayernorm, h_layernorm, false},
                          {"attention", Op::Sum, 3, 3, kAttention, h_attention, false},
                      });
    return v;
  }();
  return t;
}

std::string_view type_phrase(KgAttrType t) {
  switch (t) {
    case T::Int:
      return "an integer";
    case T::Float:
      return "a number";
    case T::Bool:
      return "true or false";
    case T::DType:
      return "a dtype (f32 f64 f16 bf16 i32 i64 i8 u8 bool)";
    case T::Ints:
      return "a list of integers";
    case T::Name:
      return "a name (such as none, add, linear or half_pixel)";
  }
  return "?";
}

bool has_type(const AttrValue& v, KgAttrType t) {
  switch (t) {
    case T::Int:
      return std::holds_alternative<int64_t>(v);
    case T::Float:
      return std::holds_alternative<double>(v) || std::holds_alternative<int64_t>(v);
    case T::Bool:
      return std::holds_alternative<bool>(v);
    case T::DType:
      return std::holds_alternative<DType>(v);
    case T::Ints:
      return std::holds_alternative<std::vector<int64_t>>(v);
    case T::Name:
      return std::holds_alternative<std::string>(v);
  }
  return false;
}

std::string operand_count_phrase(std::string_view name) {
  int lo = -1, hi = -1;
  for (const KgOpSpec& s : table()) {
    if (s.name != name) continue;
    if (lo < 0)
      lo = s.min_operands, hi = s.max_operands;
    else
      lo = std::min(lo, s.min_operands), hi = std::max(hi, s.max_operands);
  }
  if (hi < 0) return fmt::format("at least {} operand{}", lo, lo == 1 ? "" : "s");
  if (lo == hi) return fmt::format("{} operand{}", lo, lo == 1 ? "" : "s");
  return fmt::format("{} or {} operands", lo, hi);
}

Expected<void> check_attrs(const KgOpSpec& spec, const std::vector<NamedAttr>& attrs) {
  for (size_t i = 0; i < attrs.size(); ++i) {
    const auto& [name, value] = attrs[i];
    auto it = std::find_if(spec.attrs.begin(), spec.attrs.end(),
                           [&](const KgAttrSpec& a) { return a.name == name; });
    if (it == spec.attrs.end()) return op_error(spec.name, "unknown attribute '{}'", name);
    for (size_t j = 0; j < i; ++j)
      if (attrs[j].first == name) return op_error(spec.name, "attribute '{}' is given twice", name);
    if (!has_type(value, it->type))
      return op_error(spec.name, "attribute '{}' must be {}, got {}", name, type_phrase(it->type),
                      format_attr_value(value));
  }
  for (const KgAttrSpec& a : spec.attrs) {
    bool given =
        std::any_of(attrs.begin(), attrs.end(), [&](auto& p) { return p.first == a.name; });
    if (a.required && !given) return op_error(spec.name, "missing attribute '{}'", a.name);
  }
  return {};
}

// Literal operands become scalars of the dtype of the first value operand that is a node (for
// `where`, the condition is not a value operand and a literal condition is bool).
Expected<Xs> materialize(Builder& b, std::string_view name, const std::vector<Operand>& args) {
  size_t first_value = name == "where" ? 1 : 0;
  DType lit = DType::f32;
  for (size_t i = first_value; i < args.size(); ++i)
    if (auto* n = std::get_if<const Node*>(&args[i])) {
      lit = (*n)->dtype;
      break;
    }
  Xs xs;
  for (size_t i = 0; i < args.size(); ++i) {
    if (auto* n = std::get_if<const Node*>(&args[i])) {
      xs.push_back(*n);
      continue;
    }
    DType t = name == "where" && i == 0 ? DType::boolean : lit;
    const auto* whole = std::get_if<int64_t>(&args[i]);
    if (whole && t == DType::i64) {
      KILN_IR_TRY(const Node* s, b.full_int({}, *whole, t));  // exact past 2^53
      xs.push_back(s);
      continue;
    }
    const double v = whole ? static_cast<double>(*whole) : std::get<double>(args[i]);
    if (auto why = detail::unrepresentable(v, t)) {
      if (whole) return op_error(name, "literal {} {}", *whole, *why);
      return op_error(name, "literal {} {}", v, *why);
    }
    KILN_IR_TRY(const Node* s, b.scalar(v, t));
    xs.push_back(s);
  }
  return xs;
}

}  // namespace

const AttrValue* KgAttrs::find(std::string_view name) const {
  for (const auto& [k, v] : attrs_)
    if (k == name) return &v;
  return nullptr;
}
int64_t KgAttrs::i(std::string_view name, int64_t dflt) const {
  return opt_i(name).value_or(dflt);
}
std::optional<int64_t> KgAttrs::opt_i(std::string_view name) const {
  const AttrValue* v = find(name);
  if (!v) return std::nullopt;
  return std::get<int64_t>(*v);
}
double KgAttrs::f(std::string_view name, double dflt) const {
  return opt_f(name).value_or(dflt);
}
std::optional<double> KgAttrs::opt_f(std::string_view name) const {
  const AttrValue* v = find(name);
  if (!v) return std::nullopt;
  if (auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  return std::get<double>(*v);
}
bool KgAttrs::b(std::string_view name, bool dflt) const {
  const AttrValue* v = find(name);
  return v ? std::get<bool>(*v) : dflt;
}
DType KgAttrs::dt(std::string_view name, DType dflt) const {
  const AttrValue* v = find(name);
  return v ? std::get<DType>(*v) : dflt;
}
std::optional<std::vector<int64_t>> KgAttrs::ints(std::string_view name) const {
  const AttrValue* v = find(name);
  if (!v) return std::nullopt;
  return std::get<std::vector<int64_t>>(*v);
}

std::string_view KgAttrs::name(std::string_view name, std::string_view dflt) const {
  const AttrValue* v = find(name);
  return v ? std::string_view(std::get<std::string>(*v)) : dflt;
}

const KgOpSpec* find_kg_op(std::string_view name, size_t n_operands) {
  const KgOpSpec* found = nullptr;
  for (const KgOpSpec& s : table()) {
    if (s.name != name) continue;
    bool fits = static_cast<int>(n_operands) >= s.min_operands &&
                (s.max_operands < 0 || static_cast<int>(n_operands) <= s.max_operands);
    if (fits) return &s;
    if (!found) found = &s;
  }
  return found;
}

const KgOpSpec& kg_op_of(const Node* n) {
  for (const KgOpSpec& s : table())
    if (s.primitive && s.op == n->op) return s;
  KILN_CHECK(false) << "no .kg spelling for " << op_enum_name(n->op);
  return table().front();
}

std::optional<AttrKey> attr_key_of(std::string_view name) {
  for (int k = 0; k < kAttrKeyCount; ++k)
    if (attr_name(static_cast<AttrKey>(k)) == name) return static_cast<AttrKey>(k);
  return std::nullopt;
}

NodeResult call_kg(Builder& b, std::string_view name, const std::vector<Operand>& args,
                   const std::vector<NamedAttr>& attrs) {
  const KgOpSpec* spec = find_kg_op(name, args.size());
  if (!spec) return make_error(fmt::format("unknown op '{}'", name));
  int n = static_cast<int>(args.size());
  if (n < spec->min_operands || (spec->max_operands >= 0 && n > spec->max_operands))
    return op_error(name, "expected {}, got {}", operand_count_phrase(name), n);
  KILN_IR_OK(check_attrs(*spec, attrs));
  KILN_IR_TRY(Xs xs, materialize(b, name, args));
  return spec->handler(b, *spec, xs, KgAttrs(attrs));
}

NodeResult Builder::call(std::string_view name, const std::vector<Operand>& args,
                         const Attrs& attrs) {
  std::vector<NamedAttr> named;
  for (const auto& [k, v] : attrs.items()) named.emplace_back(std::string(attr_name(k)), v);
  return call_kg(*this, name, args, named);
}

std::string format_double(double v) {
  return fmt::format("{}", v);
}

std::string format_attr_value(const AttrValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using V = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<V, int64_t>)
          return fmt::format("{}", x);
        else if constexpr (std::is_same_v<V, double>) {
          std::string s = format_double(x);
          bool looks_int = s.find_first_of(".eni") == std::string::npos;
          return looks_int ? s + ".0" : s;
        } else if constexpr (std::is_same_v<V, bool>)
          return x ? "true" : "false";
        else if constexpr (std::is_same_v<V, DType>)
          return std::string(dtype_name(x));
        else if constexpr (std::is_same_v<V, std::vector<int64_t>>)
          return detail::ints_str(x);
        else  // a name (kKgNameValues), written as the bare keyword
          return std::string(x);
      },
      v);
}

std::string format_literal(const Node* full) {
  const AttrValue* v = full->attrs.find(AttrKey::value);
  if (v && std::holds_alternative<int64_t>(*v)) return fmt::format("{}", std::get<int64_t>(*v));
  return format_double(full->attrs.f(AttrKey::value));
}

}  // namespace kiln::ir
