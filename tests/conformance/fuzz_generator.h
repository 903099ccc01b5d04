// The random graph generator of the conformance fuzz: seeded graphs over a random base shape
// (rank 1-3, extents of 1 included) and dtypes, grown by steps (fuzz_steps.h) from inputs whose
// data it chooses so that every op stays in a well-conditioned domain.
#pragma once

#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fuzz_value.h"
#include "harness.h"

namespace kiln::testing::fuzz {

// The data an input holds (all seeded): random reals, reals >= 0.25, or small integers with
// NaN, +-inf and +-0 mixed in.
enum class InputKind { normal, positive, special };

class Generator {
 public:
  // special_arithmetic false: NaN and inf never meet add, sub or mul, for a device whose driver
  // folds x*0 and x-x to 0 whatever x holds (the "ieee arithmetic" property of `kiln devices`).
  // `extent`: the extent of the base shape's axis `axis` (0: the first, -1: the last): the same
  // graph at another size of that axis, where the steps do not choose by it; else the seed's.
  Generator(Case& c, uint64_t seed, bool special_arithmetic = true,
            std::optional<int64_t> extent = std::nullopt, int axis = 0);
  // Grows the graph and returns 2-4 outputs (the last value, intermediates, a scalar if any).
  std::vector<FuzzValue> build();

  // For the steps.
  ir::Builder& b() { return c_.b; }
  const ir::Shape& base() const { return base_; }
  int rank() const { return static_cast<int>(base_.size()); }
  ir::DType float_dtype() const { return float_dtype_; }
  int64_t pick(int64_t n) { return static_cast<int64_t>(rng_() % static_cast<uint64_t>(n)); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  // A random value satisfying `pred` (nullopt if none does).
  std::optional<FuzzValue> pick_value(const std::function<bool(const FuzzValue&)>& pred);
  // A node the builder had to accept: failure is a bug of the generator, reported with the seed.
  const ir::Node* ok(const ir::NodeResult& r, const char* what) const;
  // v's node as it broadcasts against the base shape (reshaped to its frame when its dropped
  // axes would misalign it).
  const ir::Node* framed(const FuzzValue& v);
  // A new graph input of `dtype` with `frame` (bf16 data arrives as an f32 input cast to bf16:
  // .npy has no bf16, and the reproducer must replay the exact inputs).
  FuzzValue input(ir::DType dtype, ir::Shape frame, InputKind kind);
  void add(const FuzzValue& v) { values_.push_back(v); }
  uint64_t seed() const { return seed_; }
  bool special_arithmetic() const { return special_arithmetic_; }

 private:
  ir::Shape random_base();
  ir::Shape random_frame();
  void make_inputs();
  bool step();
  std::vector<FuzzValue> choose_outputs();

  Case& c_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  ir::Shape base_;
  ir::DType float_dtype_;
  bool special_arithmetic_;
  bool specials_;  // this graph's inputs carry NaN, +-inf, +-0
  std::vector<FuzzValue> values_;
};

// The frame two values broadcast to.
ir::Shape broadcast_frames(const ir::Shape& a, const ir::Shape& b);
// A value computed from `a` (and `b`): frame, exactness, NaN and precision combined; the
// caller sets the bounds and grid.
FuzzValue derive(const ir::Node* n, const FuzzValue& a);
FuzzValue derive(const ir::Node* n, const FuzzValue& a, const FuzzValue& b);

}  // namespace kiln::testing::fuzz
