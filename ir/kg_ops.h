// The `.kg` op table: operand counts and attribute specs of every op and composite by `.kg`
// name. It drives Builder::call (validation, defaults, dispatch) and the printer's attribute order.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/builder.h"

namespace kiln::ir {

// Name: one of a fixed set of keywords (kKgNameValues), kept as a string (scatter's reduction,
// resize's mode, coord and nearest); the op's constructor checks which names it takes.
enum class KgAttrType : uint8_t { Int, Float, Bool, DType, Ints, Name };
// The keywords a Name attribute takes; the `.kg` reader reads these identifiers as names.
inline constexpr std::string_view kKgNameValues[] = {
    "none", "add", "mul", "max", "min",                            // scatter_elements reduction
    "nearest", "linear", "cubic",                                  // resize mode
    "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",    // resize coord
    "align_corners", "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize",
    "round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple"};  // resize nearest

struct KgAttrSpec {
  std::string_view name;
  KgAttrType type;
  bool required;
};

struct KgOpSpec;
// Builds the node of a `.kg` call whose operands are nodes (literals already turned into scalars)
// and whose attributes have been validated against the spec.
class KgAttrs;
using KgHandler = NodeResult (*)(Builder&, const KgOpSpec&, const std::vector<const Node*>&,
                                 const KgAttrs&);

struct KgOpSpec {
  std::string_view name;
  Op op;  // the primitive, when the entry is one (composites: unused)
  int min_operands;
  int max_operands;                   // -1 = any number
  std::span<const KgAttrSpec> attrs;  // in canonical printing order
  KgHandler handler;
  bool primitive;  // false for composites, which never appear in a graph
};

// An attribute written by name, as the `.kg` reader sees it (composites have attributes such as
// eps, causal and scale that have no AttrKey).
using NamedAttr = std::pair<std::string, AttrValue>;

// Validated attributes of one call, with typed access and defaults.
class KgAttrs {
 public:
  explicit KgAttrs(const std::vector<NamedAttr>& attrs) : attrs_(attrs) {}
  const AttrValue* find(std::string_view name) const;
  int64_t i(std::string_view name, int64_t dflt) const;
  std::optional<int64_t> opt_i(std::string_view name) const;
  double f(std::string_view name, double dflt) const;
  std::optional<double> opt_f(std::string_view name) const;
  bool b(std::string_view name, bool dflt) const;
  DType dt(std::string_view name, DType dflt) const;
  std::optional<std::vector<int64_t>> ints(std::string_view name) const;
  std::string_view name(std::string_view name, std::string_view dflt) const;

 private:
  const std::vector<NamedAttr>& attrs_;
};

// The entry for `name` called with `n_operands` operands (`max`/`min`: 1 = reduction,
// 2 = elementwise); nullptr for an unknown name.
const KgOpSpec* find_kg_op(std::string_view name, size_t n_operands);
// The entry a node prints as.
const KgOpSpec& kg_op_of(const Node* n);
// The attribute key spelled `name`, if there is one.
std::optional<AttrKey> attr_key_of(std::string_view name);

// Builder::call with attributes by name: the `.kg` reader's entry point.
NodeResult call_kg(Builder& b, std::string_view name, const std::vector<Operand>& args,
                   const std::vector<NamedAttr>& attrs);

// `.kg` spellings: doubles in shortest round-trip form ("inf", "-inf", "nan"); attribute values
// with doubles always marked as floats ("2.0"), so that they re-read as the same type.
std::string format_double(double v);
std::string format_attr_value(const AttrValue& v);
// A scalar `full` written as a literal operand: its value, an integer's whole.
std::string format_literal(const Node* full);

}  // namespace kiln::ir
