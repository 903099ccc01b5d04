// The graph fuzzer's generator: base shape, inputs and their data, step loop, output choice.
#include "fuzz_generator.h"

#include <cmath>

#include "fuzz_steps.h"

namespace kiln::testing::fuzz {

using ir::DType;

namespace {

// f16/bf16 data is rounded to its dtype up front, so the input is exact in every dtype it meets.
double round_to(double v, DType dtype) {
  if (dtype != DType::f16 && dtype != DType::bf16) return v;
  ir::HostTensor cell = ir::HostTensor::zeros(dtype, {});
  cell.set(0, v);
  return cell.get(0);
}

double special_value(std::mt19937_64& rng) {
  switch (rng() % 5) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    case 3: return 0.0;
    default: return -0.0;
  }
}

ir::HostTensor make_data(DType dtype, DType rounding, const ir::Shape& shape, InputKind kind,
                         uint64_t seed) {
  ir::HostTensor t = ir::HostTensor::zeros(dtype, shape);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v;
    if (dtype == DType::boolean) {
      v = static_cast<double>(rng() & 1);
    } else if (!ir::is_float(dtype)) {
      v = static_cast<double>(rng() % 17) - (dtype == DType::u8 ? 0 : 8);
    } else if (kind == InputKind::special) {
      v = rng() % 4 == 0 ? special_value(rng) : static_cast<double>(rng() % 17) - 8;
    } else {
      v = std::clamp(normal(rng), -4.0, 4.0);
      if (kind == InputKind::positive) v = std::abs(v) + 0.25;
    }
    t.set(i, round_to(v, rounding));
  }
  return t;
}

}  // namespace

ir::Shape broadcast_frames(const ir::Shape& a, const ir::Shape& b) {
  ir::Shape out = a;
  for (size_t i = 0; i < a.size(); ++i) out[i] = std::max(a[i], b[i]);
  return out;
}

FuzzValue derive(const ir::Node* n, const FuzzValue& a) {
  FuzzValue v = a;
  v.node = n;
  if (ir::is_float(n->dtype)) v.loosest = looser(v.loosest, n->dtype);
  return v;
}

FuzzValue derive(const ir::Node* n, const FuzzValue& a, const FuzzValue& b) {
  FuzzValue v = derive(n, a);
  v.frame = broadcast_frames(a.frame, b.frame);
  v.exact = a.exact && b.exact;
  v.special = a.special || b.special;
  v.zero_sign = a.zero_sign && b.zero_sign;
  v.loosest = looser(v.loosest, b.loosest);
  v.grid = a.grid < 0 || b.grid < 0 ? -1 : std::max(a.grid, b.grid);
  return v;
}

Generator::Generator(Case& c, uint64_t seed, bool special_arithmetic, std::optional<int64_t> extent,
                     int axis)
    : c_(c),
      seed_(seed),
      rng_(seed * 0x9E3779B97F4A7C15ull),
      special_arithmetic_(special_arithmetic) {
  base_ = random_base();
  if (extent) base_[axis < 0 ? base_.size() - 1 : static_cast<size_t>(axis)] = *extent;
  constexpr DType kFloats[] = {DType::f32, DType::f32, DType::f64, DType::f16, DType::bf16};
  float_dtype_ = kFloats[pick(5)];
  specials_ = chance(0.25);
  make_inputs();
}

// Rank 1-3 with extents of 1; one graph in eight has one long axis (a single row of 2048, ...).
ir::Shape Generator::random_base() {
  ir::Shape s(static_cast<size_t>(1 + pick(3)));
  for (int64_t& e : s) e = chance(0.25) ? 1 : 2 + pick(8);
  if (chance(0.125)) {
    constexpr int64_t kLong[] = {64, 300, 512, 2048};
    for (int64_t& e : s) e = 1;
    s[static_cast<size_t>(pick(static_cast<int64_t>(s.size())))] = kLong[pick(4)];
  }
  return s;
}

// The base shape, or it with some axes reduced to 1 ([1,C] rows, [R,1] columns).
ir::Shape Generator::random_frame() {
  ir::Shape f = base_;
  if (chance(0.35))
    for (int64_t& e : f)
      if (chance(0.5)) e = 1;
  return f;
}

void Generator::make_inputs() {
  add(input(float_dtype_, base_, specials_ ? InputKind::special : InputKind::normal));
  add(input(float_dtype_, random_frame(), specials_ && chance(0.5) ? InputKind::special : InputKind::normal));
  if (chance(0.5)) add(input(float_dtype_, random_frame(), InputKind::positive));
  if (chance(0.25)) {  // a second float dtype, met through casts
    constexpr DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
    add(input(kFloats[pick(4)], random_frame(), InputKind::normal));
  }
  if (chance(0.4)) {
    constexpr DType kInts[] = {DType::i32, DType::i64, DType::i8, DType::u8};
    add(input(kInts[pick(4)], random_frame(), InputKind::normal));
  }
  if (chance(0.2)) add(input(DType::boolean, random_frame(), InputKind::normal));
}

FuzzValue Generator::input(DType dtype, ir::Shape frame, InputKind kind) {
  const DType stored = dtype == DType::bf16 ? DType::f32 : dtype;
  const ir::Node* n = c_.graph.input(stored, frame, "in" + std::to_string(c_.inputs.size()));
  c_.inputs.emplace_back(n, make_data(stored, dtype, frame, kind, seed_ * 7919 + c_.inputs.size()));
  FuzzValue v;
  v.node = dtype == DType::bf16 ? ok(b().cast(n, DType::bf16), "bf16 input") : n;
  v.frame = std::move(frame);
  v.special = kind == InputKind::special && ir::is_float(dtype);
  v.grid = v.special || !ir::is_float(dtype) ? 0 : -1;
  v.lo = dtype == DType::boolean || dtype == DType::u8 ? 0 : kind == InputKind::positive ? 0.25 : -8;
  v.hi = dtype == DType::boolean ? 1 : dtype == DType::u8 ? 16 : kind == InputKind::positive ? 4.25 : 8;
  if (ir::is_float(dtype) && !v.special && kind == InputKind::normal) v.lo = -4, v.hi = 4;
  v.loosest = ir::is_float(dtype) ? dtype : DType::f64;
  return v;
}

std::optional<FuzzValue> Generator::pick_value(const std::function<bool(const FuzzValue&)>& pred) {
  std::vector<size_t> fits;
  for (size_t i = 0; i < values_.size(); ++i)
    if (pred(values_[i])) fits.push_back(i);
  if (fits.empty()) return std::nullopt;
  // Favour recent values so that graphs grow deep rather than wide.
  size_t k = fits.size() - 1 - static_cast<size_t>(std::min<int64_t>(pick(3) == 0 ? pick(static_cast<int64_t>(fits.size())) : pick(2), static_cast<int64_t>(fits.size()) - 1));
  return values_[fits[k]];
}

const ir::Node* Generator::ok(const ir::NodeResult& r, const char* what) const {
  KILN_CHECK(r.has_value()) << "fuzz generator (seed " << seed_ << ") built an invalid " << what
                            << ": " << r.error().message;
  return *r;
}

const ir::Node* Generator::framed(const FuzzValue& v) {
  // As is only when numpy's right alignment reads its axes as the frame's: [8,1] from a frame
  // [8,1,1] would otherwise broadcast as axes 1 and 2.
  const ir::Shape& s = v.node->shape;
  const size_t lead = v.frame.size() - std::min(s.size(), v.frame.size());
  bool aligned = s.size() <= v.frame.size();
  for (size_t i = 0; aligned && i < v.frame.size(); ++i)
    aligned = i < lead ? v.frame[i] == 1 : s[i - lead] == v.frame[i];
  if (aligned) return v.node;
  return ok(b().reshape(v.node, std::vector<int64_t>(v.frame.begin(), v.frame.end())), "reshape to frame");
}

bool Generator::step() {
  using Step = StepResult (*)(Generator&);
  struct Weighted { Step step; int weight; };
  static constexpr Weighted kSteps[] = {
      {step_unary_smooth, 3}, {step_unary_exact, 2}, {step_binary, 4}, {step_compare_where, 2},
      {step_cast, 2},         {step_reduce, 4},      {step_arg_reduce, 2}, {step_view, 3},
      {step_regrow, 2},       {step_matmul, 1},      {step_composite, 1}};
  int total = 0;
  for (const Weighted& w : kSteps) total += w.weight;
  int64_t r = pick(total);
  for (const Weighted& w : kSteps) {
    if ((r -= w.weight) >= 0) continue;
    StepResult v = w.step(*this);
    if (v && v->node->op != ir::Op::Input) add(*v);
    return v.has_value();
  }
  return false;
}

std::vector<FuzzValue> Generator::build() {
  const int steps = 6 + static_cast<int>(pick(9));
  for (int made = 0, tries = 0; made < steps && tries < 200; ++tries) made += step() ? 1 : 0;
  return choose_outputs();
}

// The last value, a scalar when there is one, and intermediates: 2-4 distinct non-input values.
std::vector<FuzzValue> Generator::choose_outputs() {
  std::vector<FuzzValue> outs;
  auto take = [&](const FuzzValue& v) {
    if (v.node->op == ir::Op::Input || (v.node->op == ir::Op::Cast && v.node->inputs[0]->op == ir::Op::Input))
      return;
    for (const FuzzValue& o : outs)
      if (o.node == v.node) return;
    outs.push_back(v);
  };
  take(values_.back());
  if (auto s = pick_value([](const FuzzValue& v) { return v.node->shape.empty(); }); s && chance(0.8)) take(*s);
  const int want = 2 + static_cast<int>(pick(3));
  for (int tries = 0; static_cast<int>(outs.size()) < want && tries < 20; ++tries)
    take(values_[static_cast<size_t>(pick(static_cast<int64_t>(values_.size())))]);
  return outs;
}

}  // namespace kiln::testing::fuzz
