// What an op's importer sees: the node, its attributes and inputs, the builder, and the value
// model (a value is a graph node, a tensor known at import, or both).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/builder.h"
#include "kiln/error.h"
#include "kiln/host_tensor.h"
#include "onnx/proto.h"

namespace kiln::onnx {

// An ONNX value. `node` is null for a constant not yet used as a graph node (it becomes a scalar
// `full` or a constant input when first used). `data` is known at import: for constants and for
// inputs given a value (ImportOptions::input_values). `folded`: a constant that does not depend
// on any graph input, so ops on folded values are evaluated at import.
struct Value {
  const ir::Node* node = nullptr;
  std::optional<ir::HostTensor> data;
  bool folded = false;
  ir::DType dtype = ir::DType::f32;  // a sequence's or optional's: its tensors'
  ir::Shape shape;
  // A sequence (its elements) or an optional (its element, or none) holds no node or data of its
  // own: import-time lists of values (onnx/ops_sequence.cpp).
  TypeKind kind = TypeKind::tensor;
  std::vector<Value> items;
};

using Outs = Expected<std::vector<Value>>;

// The values a graph's nodes can name: its own (inputs, initializers, node outputs), then, for a
// subgraph (If's branches, Loop's and Scan's bodies), those of the graphs it is nested in.
struct Scope {
  std::unordered_map<std::string, Value> values;
  Scope* parent = nullptr;
  Value* find(const std::string& name) {
    for (Scope* s = this; s; s = s->parent)
      if (auto it = s->values.find(name); it != s->values.end()) return &it->second;
    return nullptr;
  }
};

class Context {
 public:
  Context(ir::Graph& g, int64_t opset) : g_(g), b_(g), opset_(opset) {}

  ir::Builder& b() { return b_; }
  int64_t opset() const { return opset_; }
  const NodeProto& node() const { return *node_; }

  // --- the node being imported
  void begin(const NodeProto& n, int index, std::vector<Value*> inputs);
  size_t num_inputs() const { return in_.size(); }
  // has, in, x, ints and floats mark input i read: the importer fails a node with an input that
  // its op's importer never looked at (ONNX ops have fixed arities: an extra input is a model
  // error, and ignored it computed something the file does not say).
  bool has(size_t i) const {
    if (i < read_.size()) read_[i] = true;
    return i < in_.size() && in_[i] != nullptr;
  }
  Value& in(size_t i) {
    read_.at(i) = true;
    return *in_[i];
  }
  // The first input present and never read, if any.
  std::optional<size_t> unread_input() const;
  size_t num_outputs() const { return node_->outputs.size(); }
  bool wants_output(size_t i) const { return i < node_->outputs.size() && !node_->outputs[i].empty(); }
  // Input i as a graph node (an error when it is missing).
  Expected<const ir::Node*> x(size_t i);
  // Input i's integer values, which must be known at import (`what` names the operand): a
  // constant, a graph input given a value, or a small value computed from those alone (evaluated
  // here by the reference interpreter; the graph is then specialized to those input values).
  Expected<std::vector<int64_t>> ints(size_t i, std::string_view what);
  // Input i's values as doubles, which must be known at import (as for ints).
  Expected<std::vector<double>> floats(size_t i, std::string_view what);
  // Input i's first value as a double (a known scalar).
  Expected<double> scalar_of(size_t i, std::string_view what);
  // Whether v's values are known at import (evaluated here from constants and given inputs when
  // it depends on nothing else).
  bool known(Value& v);

  // --- subgraphs (If's branches, Loop's and Scan's bodies; onnx/ops_control.cpp)
  // Imports `graph` nested in the current scope, its inputs bound to `inputs` in order, and
  // returns its outputs. `what` names it in errors ("body, iteration 3").
  Outs subgraph(const GraphProto& graph, std::vector<Value> inputs, std::string_view what);
  void set_scope(Scope* scope) { scope_ = scope; }

  // --- attributes: each one read is marked used; the importer fails on any not read.
  const AttributeProto* attr(std::string_view name);
  int64_t attr_i(std::string_view name, int64_t fallback);
  float attr_f(std::string_view name, float fallback);
  std::optional<std::vector<int64_t>> attr_ints(std::string_view name);
  std::optional<std::vector<float>> attr_floats(std::string_view name);
  std::optional<std::string> attr_s(std::string_view name);
  // The first attribute of the node that no importer read, if any.
  const AttributeProto* unused_attr() const;
  // The first attribute read as a type other than the one the model gives it ("attribute 'alpha'
  // is INT, expected FLOAT"), or "": the typed readers return their fallback for it, and the
  // importer fails the node with this (onnx.checker's rule; read as its other field, it was a 0).
  const std::string& attr_type_error() const { return attr_type_error_; }

  // --- results and errors
  Value out(const ir::Node* n) const {
    Value v;
    v.node = n;
    v.dtype = n->dtype;
    v.shape = n->shape;
    return v;
  }
  static Value constant(ir::HostTensor t);
  std::unexpected<Error> fail(std::string_view what) const;         // the model is wrong
  std::unexpected<Error> unsupported(std::string_view what) const;  // kiln cannot express it
  // A builder result; its error (a dtype or shape rule of kiln's) is an unsupported use.
  Expected<const ir::Node*> check(ir::NodeResult r) const;
  std::string where() const;

  // --- constants as graph nodes
  Expected<const ir::Node*> materialize(Value& v, const std::string& name);
  const std::map<const ir::Node*, std::pair<std::string, ir::HostTensor>>& constant_inputs() const {
    return constants_;
  }
  ir::Graph& graph() { return g_; }
  // A graph input given a value at import (ImportOptions::input_values).
  void add_known_input(const ir::Node* input, ir::HostTensor value) { known_.emplace(input, std::move(value)); }

 private:
  ir::Graph& g_;
  ir::Builder b_;
  int64_t opset_;
  const NodeProto* node_ = nullptr;
  int index_ = 0;
  std::vector<Value*> in_;
  std::set<std::string, std::less<>> used_;
  std::string attr_type_error_;
  mutable std::vector<bool> read_;  // per input of the node: read by its importer
  const AttributeProto* typed_attr(std::string_view name, int32_t type);
  std::map<const ir::Node*, std::pair<std::string, ir::HostTensor>> constants_;
  std::set<std::string> constant_names_;
  std::map<const ir::Node*, ir::HostTensor> known_;
  Scope* scope_ = nullptr;
  std::string prefix_;  // where the current graph is: "" for the model's, else its op and branch
  // Fills in.data from the reference interpreter when everything it depends on is known.
  void derive_data(Value& v);
};

using OpImporter = std::function<Expected<std::vector<Value>>(Context&)>;
using OpTable = std::map<std::string, OpImporter, std::less<>>;

// The op importers, by concept (onnx/ops_*.cpp).
void add_elementwise_ops(OpTable& table);
void add_tensor_ops(OpTable& table);
void add_reduce_ops(OpTable& table);
void add_index_ops(OpTable& table);
void add_window_ops(OpTable& table);
void add_signal_ops(OpTable& table);
void add_einsum_ops(OpTable& table);
void add_quant_ops(OpTable& table);
void add_recurrent_ops(OpTable& table);
void add_training_ops(OpTable& table);
void add_control_ops(OpTable& table);
void add_sequence_ops(OpTable& table);
void add_resize_ops(OpTable& table);

// Returns the error of an Expected expression; assigns its value to `var`.
#define KILN_ONNX_TRY(var, expr)                                  \
  auto KILN_ONNX_CAT(onnx_try_, __LINE__) = (expr);               \
  if (!KILN_ONNX_CAT(onnx_try_, __LINE__))                        \
    return std::unexpected(KILN_ONNX_CAT(onnx_try_, __LINE__).error()); \
  var = std::move(*KILN_ONNX_CAT(onnx_try_, __LINE__))
#define KILN_ONNX_CAT2(a, b) a##b
#define KILN_ONNX_CAT(a, b) KILN_ONNX_CAT2(a, b)

// Builder calls whose errors are unsupported uses (Context::check), with scalar operands of the
// other operand's dtype.
struct Expr {
  Context& c;
  Expected<const ir::Node*> k(double v, ir::DType t) { return c.check(c.b().scalar(v, t)); }
  Expected<const ir::Node*> bin(ir::Op op, const ir::Node* a, const ir::Node* b) {
    return c.check(c.b().binary(op, a, b));
  }
  Expected<const ir::Node*> bin(ir::Op op, const ir::Node* a, double v) {
    KILN_ONNX_TRY(const ir::Node* s, k(v, a->dtype));
    return bin(op, a, s);
  }
  Expected<const ir::Node*> un(ir::Op op, const ir::Node* a) { return c.check(c.b().unary(op, a)); }
};

// Shared lowerings of several importers: round half to even (a float x; ops_elementwise.cpp),
// softplus, and
// Conv of x by weights w with an optional bias, reading Conv's attributes (ops_window.cpp).
Expected<const ir::Node*> round_half_even(Context& c, const ir::Node* x);
// softplus(x) = log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|))
// (ops_elementwise.cpp).
Expected<const ir::Node*> stable_softplus(Context& c, const ir::Node* x);
Expected<const ir::Node*> conv_of(Context& c, const ir::Node* x, const ir::Node* w, const ir::Node* bias);

// A table the importer computes itself (a window, a DFT or mel matrix) holds at most this many
// elements; check_table_size refuses larger ones (dims from the model, product overflow-safe)
// before anything is allocated.
inline constexpr int64_t kMaxImportTable = int64_t(1) << 26;
// Steps a Loop, Scan or recurrence (RNN, GRU, LSTM) may unroll to at import (each is a copy of
// its body, or of the cell, in the graph).
inline constexpr int64_t kMaxUnrolled = 4096;
// The newest opset of the default domain the importer knows. Opsets 21 to 23 changed no
// semantics of an op kiln imports (they add element types, which are refused as ever, block
// quantization's attribute, which is an unknown attribute, and new ops); a newer one may, so a
// model that imports it is refused.
inline constexpr int64_t kNewestOpset = 23;
Expected<bool> check_table_size(Context& c, std::initializer_list<int64_t> dims, std::string_view what);

// The one output of an op built by `r` (checked).
inline Outs one(Context& c, ir::NodeResult r) {
  KILN_ONNX_TRY(const ir::Node* n, c.check(std::move(r)));
  return std::vector<Value>{c.out(n)};
}

}  // namespace kiln::onnx
