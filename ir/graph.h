// The graph IR: immutable, hash-consed tensor-op nodes owned by a Graph (the context/arena).
//
// Contract:
// - A Node is (op, dtype, shape, inputs, attrs). Nodes are created only through Graph::make (or
//   the checked smart constructors of ir/builder.h) and never change afterwards.
// - Interning: making a node equal in all five parts to an existing one returns the existing node,
//   so pointer equality is structural equality (this is CSE) and hashing is O(1).
// - Inputs (Op::Input) carry a unique `slot` attribute, so two inputs are never merged.
// - Attributes are kept sorted by key: printing and hashing are canonical.
// - Node ids grow in creation order, so sorting by id is a topological order.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/shape.h"

namespace kiln::ir {

enum class Op : uint16_t {
#define KILN_OP(Enum, name, arity, ...) Enum,
#include "kiln/ops.def"
};

inline constexpr int kOpCount = 0
#define KILN_OP(...) +1
#include "kiln/ops.def"
    ;

enum class OpKind : uint8_t { Elementwise, Reduce, Movement, Matmul, Scan, Source, Input };
// The operand dtypes an op takes (kiln/ops.def says what each means).
enum class OpDtypes : uint8_t { Any, Numeric, Float, Bool, Compare, Select, None };

std::string_view op_name(Op op);  // the `.kg` name ("max" for both Max and ReduceMax)
int op_arity(Op op);              // -1 = variadic
OpKind op_kind(Op op);
std::string_view op_enum_name(Op op);  // "ReduceMax": unambiguous, for messages and tests
OpDtypes op_dtypes(Op op);
// Scalar operations per element (kiln/ops.def); 4 or more is a costly op (a division, a root or
// a transcendental function).
int op_cost(Op op);
inline bool is_comparison(Op op) { return op_dtypes(op) == OpDtypes::Compare; }
inline bool is_elementwise(Op op) { return op_kind(op) == OpKind::Elementwise; }
inline bool is_reduce(Op op) { return op_kind(op) == OpKind::Reduce; }
inline bool is_movement(Op op) { return op_kind(op) == OpKind::Movement; }
// A view: a movement op that lowers as a remapping of its reader's index, so the fuser inlines it
// into its readers. scatter_elements lowers like one but computes (a fold per element): the fuser
// places it in a group like a reduction.
inline bool is_view(Op op) { return is_movement(op) && op != Op::ScatterElements; }

// The reductions and the views as enums of their own (their rows of kiln/ops.def, in order): a
// switch over one of them names every op of that kind and nothing else, so with -Wswitch-enum
// a new row is a compile error in each switch that has to handle it. (The elementwise rows are
// kir::Alu, ir/kernel_ir.h.)
enum class Reduction : uint8_t {
#define KILN_REDUCE(Enum, ...) Enum,
#include "kiln/ops.def"
};
enum class Movement : uint8_t {
#define KILN_MOVEMENT(Enum, ...) Enum,
#include "kiln/ops.def"
};
std::optional<Reduction> reduction_of(Op op);  // nullopt for an op of another kind
std::optional<Movement> movement_of(Op op);
Op op_of(Reduction r);
Op op_of(Movement m);

enum class AttrKey : uint8_t {
  axes, keepdim, axis, shape, dims, start, end, step, before, after, value, to, dtype, shifts,
  dim, size, name, slot, exclusive, reverse, k, largest, upper, reduction, mode, coord, nearest,
  scale, roi_start, roi_end, cubic_a, exclude_outside, antialias, dynamic
};
// How many keys there are (a new key goes last, and here): attr_name's table and
// ir/kg_ops.cpp's attr_key_of walk them all.
inline constexpr int kAttrKeyCount = static_cast<int>(AttrKey::dynamic) + 1;
std::string_view attr_name(AttrKey k);
using AttrValue = std::variant<int64_t, double, bool, DType, std::vector<int64_t>, std::string>;

// A sorted (by key) list of attributes.
class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<AttrKey, AttrValue>> init);
  void set(AttrKey k, AttrValue v);
  bool has(AttrKey k) const;
  const AttrValue* find(AttrKey k) const;
  // Typed getters; KILN_CHECK that the attribute exists with that type.
  int64_t i(AttrKey k) const;
  double f(AttrKey k) const;  // accepts an int64 too
  bool b(AttrKey k) const;
  DType dt(AttrKey k) const;
  const std::vector<int64_t>& ints(AttrKey k) const;
  const std::string& s(AttrKey k) const;
  const std::vector<std::pair<AttrKey, AttrValue>>& items() const { return items_; }
  // Doubles compare bit for bit, like the hash: two `nan` literals are the same attribute.
  bool operator==(const Attrs& o) const;
  uint64_t hash() const;

 private:
  std::vector<std::pair<AttrKey, AttrValue>> items_;
};

struct Node {
  Op op;
  DType dtype;
  Shape shape;
  std::vector<const Node*> inputs;
  Attrs attrs;
  uint64_t hash;  // structural hash (op, dtype, shape, input ids, attrs)
  uint32_t id;    // creation order within the Graph: a topological order

  int64_t numel() const { return shape_numel(shape); }
};

// The arena and interning table. Thread-safe: make() may be called from several threads.
class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Interns a node. No checking here: use ir/builder.h for checked construction.
  const Node* make(Op op, DType dtype, Shape shape, std::vector<const Node*> inputs, Attrs attrs);
  // A fresh graph input with a unique slot.
  // `dynamic`: the input's symbolic dimensions (input_symbols), "" for none.
  const Node* input(DType dtype, Shape shape, std::string name = "", std::string dynamic = "");
  size_t size() const;
  // Unique among the graphs of this process, never reused: with a node's address it names the
  // node for as long as the graph lives (nodes are immutable, and freed only with their graph).
  uint64_t serial() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// All nodes reachable from `outputs`, in topological order (by id), each once.
std::vector<const Node*> topo_order(const std::vector<const Node*>& outputs);

// An input's symbolic dimensions (DESIGN.md §2 "Shapes", docs/dynamic-shapes.md): per axis, the
// name of the size symbol it was marked with (`?b` in `.kg`, Tensor::mark_dynamic), "" for a
// static axis. Kept in the input's `dynamic` attribute as the names joined by ','.
std::vector<std::string> input_symbols(const Node& input);
// The attribute's text for `symbols` ("" when none is named).
std::string input_symbols_attr(const std::vector<std::string>& symbols);

}  // namespace kiln::ir
