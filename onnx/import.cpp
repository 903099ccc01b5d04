// The ONNX importer's graph walk: inputs, initializers, nodes in order, folding at import, outputs.
#include <fmt/format.h>
#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "interp/reference.h"
#include "ir/kg.h"
#include "onnx/import_context.h"
#include "onnx/importer.h"

namespace kiln::onnx {

// Context ------------------------------------------------------------------------------------

void Context::begin(const NodeProto& n, int index, std::vector<Value*> inputs) {
  node_ = &n;
  index_ = index;
  in_ = std::move(inputs);
  read_.assign(in_.size(), false);
  used_.clear();
  attr_type_error_.clear();
}

std::optional<size_t> Context::unread_input() const {
  for (size_t i = 0; i < in_.size(); ++i)
    if (in_[i] && !read_[i]) return i;
  return std::nullopt;
}

std::string Context::where() const {
  return fmt::format("onnx: {}node {} '{}' ({})", prefix_, index_, node_->name, node_->op_type);
}

std::unexpected<Error> Context::fail(std::string_view what) const {
  return make_error(fmt::format("{}: {}", where(), what));
}

std::unexpected<Error> Context::unsupported(std::string_view what) const {
  return make_error(fmt::format("{}: unsupported: {}", where(), what));
}

Expected<const ir::Node*> Context::check(ir::NodeResult r) const {
  if (!r) return unsupported(r.error().message);
  return *r;
}

Value Context::constant(ir::HostTensor t) {
  Value v;
  v.dtype = t.dtype;
  v.shape = t.shape;
  v.data = std::move(t);
  v.folded = true;
  return v;
}

Expected<const ir::Node*> Context::materialize(Value& v, const std::string& name) {
  if (v.kind != TypeKind::tensor)
    return fail(fmt::format("'{}' is a {} where a tensor is expected", name,
                            v.kind == TypeKind::sequence ? "sequence" : "optional"));
  if (v.node) return v.node;
  KILN_CHECK(v.data.has_value()) << "a value with neither a node nor data";
  const ir::HostTensor& t = *v.data;
  if (t.numel() == 1) {
    auto n = t.dtype == ir::DType::i64 ? b_.full_int(t.shape, t.get_int(0), t.dtype)  // exact
                                       : b_.full(t.shape, t.get(0), t.dtype);
    if (!n) return std::unexpected(n.error());
    v.node = *n;
    return v.node;
  }
  std::string unique = name.empty() ? "const" : name;
  for (int k = 1; constant_names_.contains(unique); ++k) unique = fmt::format("{}_{}", name, k);
  constant_names_.insert(unique);
  v.node = g_.input(t.dtype, t.shape, unique);
  constants_[v.node] = {unique, t};
  return v.node;
}

Expected<const ir::Node*> Context::x(size_t i) {
  if (!has(i)) return fail(fmt::format("input {} is missing", i));
  return materialize(*in_[i], node_->inputs[i]);
}

// Values derived from known inputs are evaluated only here, when an op needs one as a constant:
// evaluating every small value of a model would cost an interpreter run per node.
void Context::derive_data(Value& v) {
  constexpr int64_t kDeriveLimit = 4096;
  if (v.data || !v.node || v.node->numel() > kDeriveLimit) return;
  std::unordered_map<const ir::Node*, ir::HostTensor> bindings;
  for (const auto& [node, t] : known_) bindings.emplace(node, t);
  for (const auto& [node, named] : constants_) bindings.emplace(node, named.second);
  auto values = interp::evaluate_reference({v.node}, bindings);
  if (values) v.data = std::move((*values)[0]);  // else an input it reads has no known value
}

bool Context::known(Value& v) {
  derive_data(v);
  return v.data.has_value();
}

Expected<std::vector<int64_t>> Context::ints(size_t i, std::string_view what) {
  if (!has(i)) return fail(fmt::format("input {} ({}) is missing", i, what));
  derive_data(*in_[i]);
  const Value& v = *in_[i];
  if (!v.data)
    return unsupported(fmt::format(
        "input {} '{}' ({}) must be known at import: a constant, an initializer or a graph input "
        "given a value",
        i, node_->inputs[i], what));
  if (!ir::is_int(v.dtype)) return fail(fmt::format("input {} ({}) must be integers", i, what));
  std::vector<int64_t> out(v.data->numel());
  for (int64_t k = 0; k < v.data->numel(); ++k) out[k] = v.data->get_int(k);
  return out;
}

Expected<std::vector<double>> Context::floats(size_t i, std::string_view what) {
  if (!has(i)) return fail(fmt::format("input {} ({}) is missing", i, what));
  derive_data(*in_[i]);
  const Value& v = *in_[i];
  if (!v.data)
    return unsupported(fmt::format("input {} '{}' ({}) must be known at import", i,
                                   node_->inputs[i], what));
  std::vector<double> out(v.data->numel());
  for (int64_t k = 0; k < v.data->numel(); ++k) out[k] = v.data->get(k);
  return out;
}

Expected<double> Context::scalar_of(size_t i, std::string_view what) {
  KILN_ONNX_TRY(std::vector<double> v, floats(i, what));
  if (v.size() != 1) return fail(fmt::format("input {} ({}) must hold one value", i, what));
  return v[0];
}

const AttributeProto* Context::attr(std::string_view name) {
  for (const AttributeProto& a : node_->attributes)
    if (a.name == name) {
      used_.insert(a.name);
      return &a;
    }
  return nullptr;
}

namespace {
// AttributeProto.AttributeType's names, by value.
std::string_view attribute_type_name(int32_t type) {
  static constexpr std::string_view kNames[] = {
      "UNDEFINED",      "FLOAT",      "INT",        "STRING",  "TENSOR", "GRAPH",
      "FLOATS",         "INTS",       "STRINGS",    "TENSORS", "GRAPHS", "SPARSE_TENSOR",
      "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS"};
  return type >= 0 && type < static_cast<int32_t>(std::size(kNames)) ? kNames[type]
                                                                     : "an unknown type";
}
constexpr int32_t kAttrFloat = 1, kAttrInt = 2, kAttrString = 3, kAttrFloats = 6, kAttrInts = 7;
}  // namespace

// An attribute of another type than the reader's (a type of 0, left unset by old exporters, is
// read as any): the first such is kept for the importer to fail the node with.
const AttributeProto* Context::typed_attr(std::string_view name, int32_t type) {
  const AttributeProto* a = attr(name);
  if (!a || a->type == 0 || a->type == type) return a;
  if (attr_type_error_.empty())
    attr_type_error_ = fmt::format("attribute '{}' is {}, expected {}", name,
                                   attribute_type_name(a->type), attribute_type_name(type));
  return nullptr;
}

int64_t Context::attr_i(std::string_view name, int64_t fallback) {
  const AttributeProto* a = typed_attr(name, kAttrInt);
  return a ? a->i : fallback;
}

float Context::attr_f(std::string_view name, float fallback) {
  const AttributeProto* a = typed_attr(name, kAttrFloat);
  return a ? a->f : fallback;
}

std::optional<std::vector<int64_t>> Context::attr_ints(std::string_view name) {
  const AttributeProto* a = typed_attr(name, kAttrInts);
  if (!a) return std::nullopt;
  return a->ints;
}

std::optional<std::vector<float>> Context::attr_floats(std::string_view name) {
  const AttributeProto* a = typed_attr(name, kAttrFloats);
  if (!a) return std::nullopt;
  return a->floats;
}

std::optional<std::string> Context::attr_s(std::string_view name) {
  const AttributeProto* a = typed_attr(name, kAttrString);
  if (!a) return std::nullopt;
  return a->s;
}

const AttributeProto* Context::unused_attr() const {
  for (const AttributeProto& a : node_->attributes)
    if (!used_.contains(a.name)) return &a;
  return nullptr;
}

Expected<bool> check_table_size(Context& c, std::initializer_list<int64_t> dims, std::string_view what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && n > kMaxImportTable / d))
      return c.unsupported(fmt::format("{} would hold more than {} elements (computed at import)", what, kMaxImportTable));
    n *= d;
  }
  return true;
}

// The graph walk ------------------------------------------------------------------------------

namespace {

// Values computed only from constants are evaluated at import up to this many elements (shape
// arithmetic, small tables); larger ones stay graph nodes for the device to compute.
constexpr int64_t kFoldLimit = 1 << 16;
// Initializers up to this size take part in folding; larger ones (weights) are device inputs.
constexpr int64_t kFoldInitializerLimit = 4096;

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    add_elementwise_ops(t);
    add_tensor_ops(t);
    add_reduce_ops(t);
    add_index_ops(t);
    add_window_ops(t);
    add_signal_ops(t);
    add_einsum_ops(t);
    add_quant_ops(t);
    add_recurrent_ops(t);
    add_training_ops(t);
    add_control_ops(t);
    add_sequence_ops(t);
    add_resize_ops(t);
    return t;
  }();
  return table;
}

std::string dims_str(const std::vector<Dimension>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? "," : "") + (dims[i].value ? std::to_string(*dims[i].value)
                                         : (dims[i].param.empty() ? "?" : dims[i].param));
  return s + "]";
}

}  // namespace

std::string input_symbol(std::string_view input, size_t axis, const Dimension& d) {
  std::string symbol = d.param.empty() ? fmt::format("{}_{}", input, axis) : d.param;
  for (char& c : symbol)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  if (std::isdigit(static_cast<unsigned char>(symbol[0]))) symbol.insert(0, "_");
  return symbol;
}

namespace {

Expected<Value> graph_input(ir::Graph& g, const ValueInfo& info, const ImportOptions& options) {
  if (!info.is_tensor)
    return make_error(fmt::format("onnx: graph input '{}': unsupported: only tensor inputs are supported", info.name));
  auto dtype = onnx_dtype(info.elem_type);
  if (!dtype)
    return make_error(fmt::format("onnx: graph input '{}': unsupported: {}", info.name, dtype.error().message));
  auto given = options.input_values.find(info.name);
  const ir::HostTensor* value = given == options.input_values.end() ? nullptr : &given->second;
  ir::Shape shape;
  std::vector<std::string> symbols;  // of the dimensions sized by options.sizes (or unsized)
  if (value) {
    bool ok = value->dtype == *dtype && (!info.shape || info.shape->size() == value->shape.size());
    for (size_t d = 0; ok && info.shape && d < info.shape->size(); ++d)
      ok = !(*info.shape)[d].value || *(*info.shape)[d].value == value->shape[d];
    if (!ok)
      return make_error(fmt::format("onnx: graph input '{}': expected {}{}, got {}{}", info.name,
                                    ir::dtype_name(*dtype),
                                    info.shape ? dims_str(*info.shape) : std::string("[...]"),
                                    ir::dtype_name(value->dtype), ir::shape_str(value->shape)));
    shape = value->shape;
  } else {
    if (!info.shape)
      return make_error(fmt::format("onnx: graph input '{}' has no declared shape: give it a value", info.name));
    for (size_t axis = 0; axis < info.shape->size(); ++axis) {
      const Dimension& d = (*info.shape)[axis];
      if (d.value) {
        shape.push_back(*d.value);
        symbols.emplace_back();
        continue;
      }
      std::string symbol = input_symbol(info.name, axis, d);
      auto size = options.sizes.find(symbol);
      if (size == options.sizes.end() && !options.unsized)
        return make_error(
            fmt::format("onnx: graph input '{}' has the symbolic dimension '{}' ({}): give it a "
                        "size (--dim {}=N) or a value",
                        info.name, d.param.empty() ? "?" : d.param, dims_str(*info.shape), symbol));
      shape.push_back(size != options.sizes.end() ? size->second : *options.unsized);
      symbols.push_back(std::move(symbol));
    }
  }
  // A declared dimension below 0 or a shape past kiln's limit (an --dim too) is refused here,
  // naming the input, before any buffer of it is sized.
  if (auto problem = ir::shape_size_problem(shape))
    return make_error(fmt::format("onnx: graph input '{}': shape {} {}", info.name,
                                  ir::shape_brief(shape), *problem));
  Value v;
  v.dtype = *dtype;
  v.shape = shape;
  v.node = g.input(*dtype, shape, info.name, ir::input_symbols_attr(symbols));
  if (value) v.data = *value;
  return v;
}

// The sizes the given input values bind to the graph's dim_params: an error naming both inputs
// where two give one symbol two sizes (or a value and --dim disagree).
Expected<void> check_symbol_sizes(const GraphProto& graph, const ImportOptions& options) {
  std::map<std::string, std::pair<int64_t, std::string>> bound;  // symbol -> size, whose
  for (const auto& [symbol, size] : options.sizes) bound.emplace(symbol, std::pair(size, "--dim"));
  for (const ValueInfo& info : graph.inputs) {
    auto given = options.input_values.find(info.name);
    if (info.kind != TypeKind::tensor || !info.shape || given == options.input_values.end() ||
        given->second.shape.size() != info.shape->size())
      continue;  // graph_input says what is wrong with a value of another rank
    for (size_t axis = 0; axis < info.shape->size(); ++axis) {
      const Dimension& d = (*info.shape)[axis];
      if (d.value) continue;
      const std::string symbol = input_symbol(info.name, axis, d);
      const int64_t size = given->second.shape[axis];
      const std::string whose = fmt::format("input '{}'", info.name);
      auto [it, fresh] = bound.emplace(symbol, std::pair(size, whose));
      if (!fresh && it->second.first != size)
        return make_error(
            fmt::format("onnx: the symbolic dimension '{}' is {} in {} but {} in {} ({}{})",
                        d.param.empty() ? symbol : d.param, it->second.first, it->second.second,
                        size, whose, info.name, dims_str(*info.shape)));
    }
  }
  return {};
}

const char* kind_name(TypeKind k) {
  switch (k) {
    case TypeKind::tensor: return "tensor";
    case TypeKind::sequence: return "sequence";
    case TypeKind::optional: return "optional";
    case TypeKind::other: return "map or sparse tensor";
  }
  return "value";
}

// A graph input of any kind: a tensor input, or a sequence's or optional's tensors as inputs
// named by their flat names (each given in options.input_values, as its structure is in
// options.input_structures). `inputs` collects the tensor inputs made.
Expected<Value> any_input(ir::Graph& g, const ValueInfo& info, const std::string& flat, const Structure* st,
                          const ImportOptions& options, std::vector<std::pair<std::string, Value>>& inputs) {
  if (info.kind == TypeKind::tensor) {
    ValueInfo named = info;
    named.name = flat;
    auto v = graph_input(g, named, options);
    if (!v) return std::unexpected(v.error());
    inputs.emplace_back(flat, *v);
    return v;
  }
  if (info.kind == TypeKind::other || !info.elem)
    return make_error(fmt::format("onnx: graph input '{}': unsupported: a {} (kiln imports tensors, sequences and optionals)",
                                  flat, kind_name(info.kind)));
  if (!st || st->kind != info.kind)
    return make_error(fmt::format("onnx: graph input '{}' is a {}: give its value", flat, kind_name(info.kind)));
  if (info.kind == TypeKind::optional && st->items.size() > 1)
    return make_error(fmt::format("onnx: graph input '{}': an optional holds at most one value", flat));
  Value v;
  v.kind = info.kind;
  const ValueInfo* leaf = info.elem.get();
  while (leaf->kind != TypeKind::tensor && leaf->elem) leaf = leaf->elem.get();
  if (auto dtype = onnx_dtype(leaf->elem_type)) v.dtype = *dtype;
  for (size_t i = 0; i < st->items.size(); ++i) {
    const std::string name = info.kind == TypeKind::sequence ? fmt::format("{}[{}]", flat, i) : flat;
    auto item = any_input(g, *info.elem, name, &st->items[i], options, inputs);
    if (!item) return std::unexpected(item.error());
    v.items.push_back(std::move(*item));
  }
  return v;
}

// A graph output of any kind: its tensors as outputs by flat name; returns its structure.
Expected<Structure> any_output(Context& ctx, Value& v, const std::string& flat,
                               std::vector<std::pair<std::string, const ir::Node*>>& outputs) {
  Structure st;
  st.kind = v.kind;
  if (v.kind == TypeKind::tensor) {
    auto node = ctx.materialize(v, flat);
    if (!node) return std::unexpected(node.error());
    outputs.emplace_back(flat, *node);
    return st;
  }
  for (size_t i = 0; i < v.items.size(); ++i) {
    auto item = any_output(ctx, v.items[i], v.kind == TypeKind::sequence ? fmt::format("{}[{}]", flat, i) : flat, outputs);
    if (!item) return std::unexpected(item.error());
    st.items.push_back(std::move(*item));
  }
  return st;
}

// Graph inputs and outputs of one name twice are a malformed model (onnx.checker's rule): which
// of the two a node reads, or which value a caller gets, would be a guess.
Expected<void> check_unique_names(const GraphProto& graph) {
  for (const auto* list : {&graph.inputs, &graph.outputs}) {
    std::unordered_set<std::string> seen;
    for (const ValueInfo& info : *list)
      if (!seen.insert(info.name).second)
        return make_error(fmt::format("onnx: graph {} '{}' is listed twice",
                                      list == &graph.inputs ? "input" : "output", info.name));
  }
  return {};
}

// Whether every graph input (but those an initializer gives) is a tensor of fixed, declared
// dimensions: then every value's shape is the model's own, and a declared output shape must hold.
bool fixed_inputs(const GraphProto& graph) {
  std::unordered_set<std::string> initialized;
  for (const auto& t : graph.initializers) initialized.insert(t.name);
  return std::ranges::all_of(graph.inputs, [&](const ValueInfo& info) {
    return initialized.contains(info.name) ||
           (info.kind == TypeKind::tensor && info.shape &&
            std::ranges::all_of(*info.shape,
                                [](const Dimension& d) { return d.value.has_value(); }));
  });
}

// A tensor output computed with another element type or rank than the model declares, or (with
// fixed inputs) another fixed dimension: the model and kiln disagree about what it computes, so
// it is an error naming both rather than a result of another type or shape than the caller reads.
Expected<void> check_declared_output(const ValueInfo& info, const ir::Node& computed, bool fixed) {
  const auto declared = [&] {
    const auto dtype = onnx_dtype(info.elem_type);
    return fmt::format("{}{}", dtype ? ir::dtype_name(*dtype) : onnx_dtype_name(info.elem_type),
                       info.shape ? dims_str(*info.shape) : std::string("[...]"));
  };
  const auto differs = [&] {
    return make_error(fmt::format(
        "onnx: graph output '{}' is declared {}, but the graph computes {}{}", info.name,
        declared(), ir::dtype_name(computed.dtype), ir::shape_str(computed.shape)));
  };
  if (info.elem_type != 0)
    if (auto dtype = onnx_dtype(info.elem_type); dtype && *dtype != computed.dtype)
      return differs();
  if (!info.shape) return {};
  if (info.shape->size() != computed.shape.size()) return differs();
  for (size_t d = 0; fixed && d < info.shape->size(); ++d)
    if (const auto& v = (*info.shape)[d].value; v && *v >= 0 && *v != computed.shape[d])
      return differs();
  return {};
}

// Whether every node reachable from `outputs` has been seen: marks them in `seen`.
void mark_reachable(const std::vector<const ir::Node*>& outputs,
                    std::unordered_set<const ir::Node*>& seen) {
  std::vector<const ir::Node*> stack(outputs.begin(), outputs.end());
  while (!stack.empty()) {
    const ir::Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    for (const ir::Node* i : n->inputs) stack.push_back(i);
  }
}

// Evaluates a node's outputs at import when every input is a folded constant.
Expected<void> fold(Context& ctx, std::vector<Value>& outs) {
  std::vector<const ir::Node*> nodes;
  for (Value& v : outs)
    if (!v.data) {
      if (!v.node || v.node->numel() > kFoldLimit) return {};
      nodes.push_back(v.node);
    }
  if (nodes.empty()) {
    for (Value& v : outs) v.folded = true;
    return {};
  }
  std::unordered_map<const ir::Node*, ir::HostTensor> bindings;
  for (const auto& [node, named] : ctx.constant_inputs()) bindings.emplace(node, named.second);
  auto values = interp::evaluate_reference(nodes, bindings);
  if (!values) return ctx.fail(fmt::format("evaluating at import: {}", values.error().message));
  size_t k = 0;
  for (Value& v : outs) {
    if (!v.data) {
      v.data = std::move((*values)[k++]);
      v.node = nullptr;
    }
    v.folded = true;
  }
  return {};
}

// A graph's initializers as constants (those small enough take part in folding).
Expected<void> add_initializers(const GraphProto& graph, std::unordered_map<std::string, Value>& values,
                                std::string_view where) {
  for (const TensorProto& t : graph.initializers) {
    auto h = to_host_tensor(t);
    if (!h) return make_error(fmt::format("onnx: {}initializer '{}': {}", where, t.name, h.error().message));
    Value v = Context::constant(std::move(*h));
    v.folded = v.data->numel() <= kFoldInitializerLimit;
    values[t.name] = std::move(v);
  }
  return {};
}

// Imports a graph's nodes in order into `scope` (which holds its inputs and initializers).
Expected<void> import_nodes(Context& ctx, const GraphProto& graph, Scope& scope) {
  const OpTable& table = op_table();
  for (size_t index = 0; index < graph.nodes.size(); ++index) {
    const NodeProto& n = graph.nodes[index];
    std::vector<Value*> inputs;
    for (const std::string& name : n.inputs) {
      if (name.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      Value* v = scope.find(name);
      if (!v) {
        ctx.begin(n, static_cast<int>(index), {});
        return ctx.fail(fmt::format("input '{}' is not defined before it", name));
      }
      inputs.push_back(v);
    }
    ctx.begin(n, static_cast<int>(index), inputs);
    // Ops of other domains are in the table as "domain:op" (ai.onnx.preview.training's optimizers).
    const bool default_domain = n.domain.empty() || n.domain == "ai.onnx";
    auto op = table.find(default_domain ? n.op_type : n.domain + ":" + n.op_type);
    if (op == table.end() && !default_domain)
      return ctx.unsupported(fmt::format("op {} of domain '{}'", n.op_type, n.domain));
    if (op == table.end())
      return ctx.unsupported(fmt::format("op {} (opset {})", n.op_type, ctx.opset()));
    auto outs = op->second(ctx);
    // A mistyped attribute first: read as its fallback, it may be why the importer failed.
    if (!ctx.attr_type_error().empty()) return ctx.fail(ctx.attr_type_error());
    if (!outs) return std::unexpected(outs.error());
    if (const AttributeProto* a = ctx.unused_attr())
      return ctx.unsupported(fmt::format("attribute '{}' of {}", a->name, n.op_type));
    if (std::optional<size_t> extra = ctx.unread_input())
      return ctx.fail(
          fmt::format("input {} ('{}') is not one {} takes", *extra, n.inputs[*extra], n.op_type));
    // An op with a subgraph (If, Loop, Scan) may read any value of the scopes it is in: its
    // outputs say themselves whether they are folded.
    bool all_folded = !n.inputs.empty();
    for (const AttributeProto& a : n.attributes) all_folded &= !a.g && a.graphs.empty();
    for (Value* v : inputs) all_folded &= v == nullptr || v->folded;
    if (all_folded) {
      auto f = fold(ctx, *outs);
      if (!f) return std::unexpected(f.error());
    }
    if (outs->size() < n.outputs.size())
      for (size_t i = outs->size(); i < n.outputs.size(); ++i)
        if (!n.outputs[i].empty())
          return ctx.unsupported(fmt::format("output {} of {}", i, n.op_type));
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i].empty()) continue;
      // ONNX graphs assign each name once: a second definition would silently replace the first.
      if (!scope.values.emplace(n.outputs[i], (*outs)[i]).second)
        return ctx.fail(
            fmt::format("output '{}' is already defined in this graph (ONNX assigns "
                        "each name once)",
                        n.outputs[i]));
    }
  }
  return {};
}

}  // namespace

Outs Context::subgraph(const GraphProto& graph, std::vector<Value> inputs, std::string_view what) {
  if (inputs.size() != graph.inputs.size())
    return fail(fmt::format("its {} takes {} inputs, {} given", what, graph.inputs.size(), inputs.size()));
  if (graph.sparse_initializers) return unsupported(fmt::format("its {} has sparse initializers", what));
  // The node being imported, restored when the subgraph's own nodes are done.
  const NodeProto* node = node_;
  const int index = index_;
  std::vector<Value*> in = in_;
  std::set<std::string, std::less<>> used = used_;
  std::string attr_type_error = attr_type_error_;
  std::vector<bool> read = read_;
  std::string prefix = prefix_;
  Scope* outer = scope_;
  const std::string inner_prefix = fmt::format("{}node {} '{}' ({}) {}: ", prefix_, index_, node_->name, node_->op_type, what);

  Scope scope;
  scope.parent = scope_;
  for (size_t i = 0; i < inputs.size(); ++i) scope.values[graph.inputs[i].name] = std::move(inputs[i]);
  auto walked = add_initializers(graph, scope.values, inner_prefix);
  if (walked) {
    prefix_ = inner_prefix;
    scope_ = &scope;
    walked = import_nodes(*this, graph, scope);
  }
  node_ = node;
  index_ = index;
  in_ = std::move(in);
  used_ = std::move(used);
  attr_type_error_ = std::move(attr_type_error);
  read_ = std::move(read);
  prefix_ = std::move(prefix);
  scope_ = outer;
  if (!walked) return std::unexpected(walked.error());

  std::vector<Value> outs;
  for (const ValueInfo& info : graph.outputs) {
    Value* v = scope.find(info.name);
    if (!v) return fail(fmt::format("its {} output '{}' is not computed by any node", what, info.name));
    outs.push_back(*v);
  }
  return outs;
}

Expected<ImportedModel> import_model(ir::Graph& g, std::string_view bytes,
                                     const ImportOptions& options) {
  auto model = parse_model(bytes);
  if (!model) return std::unexpected(model.error());
  ImportedModel result;
  for (const OpsetId& id : model->opsets)
    if (id.domain.empty() || id.domain == "ai.onnx") result.opset = id.version;
  if (result.opset == 0) result.opset = 1;
  // A newer opset may give an op of an older name other semantics: refused rather than guessed.
  if (result.opset > kNewestOpset)
    return make_error(fmt::format(
        "onnx: unsupported: the model imports opset {} of the default domain; kiln imports "
        "opsets 1 to {}",
        result.opset, kNewestOpset));
  const GraphProto& graph = model->graph;
  if (auto listed = check_unique_names(graph); !listed) return std::unexpected(listed.error());
  if (graph.sparse_initializers)
    return make_error("onnx: unsupported: the graph has sparse initializers");

  if (auto sized = check_symbol_sizes(graph, options); !sized)
    return std::unexpected(sized.error());
  Context ctx(g, result.opset);
  std::unordered_map<std::string, Value> values;
  auto inits = add_initializers(graph, values, "");
  if (!inits) return std::unexpected(inits.error());
  for (const ValueInfo& info : graph.inputs) {
    // An input with an initializer of its name (IR < 4 lists them) is that initializer unless a
    // value is given for it.
    if (values.contains(info.name) && !options.input_values.contains(info.name)) continue;
    auto st = options.input_structures.find(info.name);
    std::vector<std::pair<std::string, Value>> tensors;
    auto v = any_input(g, info, info.name, st == options.input_structures.end() ? nullptr : &st->second, options, tensors);
    if (!v) return std::unexpected(v.error());
    for (auto& [name, t] : tensors) {
      result.graph.inputs.emplace_back(name, t.node);
      if (t.data) ctx.add_known_input(t.node, *t.data);
      const std::vector<std::string> symbols = ir::input_symbols(*t.node);
      for (size_t axis = 0; axis < symbols.size(); ++axis)
        if (!symbols[axis].empty() && std::ranges::none_of(result.graph.sizes, [&](const auto& s) {
              return s.first == symbols[axis];
            }))
          result.graph.sizes.emplace_back(symbols[axis], t.node->shape[axis]);
    }
    values[info.name] = std::move(*v);
  }

  Scope scope;
  scope.values = std::move(values);
  ctx.set_scope(&scope);
  auto walked = import_nodes(ctx, graph, scope);
  if (!walked) return std::unexpected(walked.error());

  std::vector<const ir::Node*> outputs;
  for (const ValueInfo& info : graph.outputs) {
    Value* v = scope.find(info.name);
    if (!v) return make_error(fmt::format("onnx: graph output '{}' is not computed by any node", info.name));
    std::vector<std::pair<std::string, const ir::Node*>> tensors;
    auto st = any_output(ctx, *v, info.name, tensors);
    if (!st) return std::unexpected(st.error());
    if (v->kind != TypeKind::tensor) result.output_structures[info.name] = std::move(*st);
    if (v->kind == TypeKind::tensor && !tensors.empty())
      if (auto declared = check_declared_output(info, *tensors.front().second, fixed_inputs(graph));
          !declared)
        return std::unexpected(declared.error());
    for (auto& [name, node] : tensors) {
      result.graph.outputs.emplace_back(name, node);
      outputs.push_back(node);
    }
  }
  std::unordered_set<const ir::Node*> reachable;
  mark_reachable(outputs, reachable);
  for (const auto& [node, named] : ctx.constant_inputs()) {
    if (!reachable.contains(node)) continue;
    result.graph.inputs.emplace_back(named.first, node);
    result.constants[named.first] = named.second;
  }
  for (const auto& [name, v] : scope.values)
    if (v.node && reachable.contains(v.node)) result.graph.values.emplace_back(name, v.node);
  std::sort(result.graph.values.begin(), result.graph.values.end(),
            [](const ir::NamedNode& a, const ir::NamedNode& b) {
              return a.second->id != b.second->id ? a.second->id < b.second->id : a.first < b.first;
            });
  return result;
}

std::vector<std::string> flat_names(const std::string& name, const Structure& s) {
  if (s.kind == TypeKind::tensor) return {name};
  std::vector<std::string> out;
  for (size_t i = 0; i < s.items.size(); ++i) {
    auto inner = flat_names(s.kind == TypeKind::sequence ? fmt::format("{}[{}]", name, i) : name, s.items[i]);
    out.insert(out.end(), inner.begin(), inner.end());
  }
  return out;
}

Expected<Structure> flatten(const ValueData& d, const std::string& name, std::map<std::string, ir::HostTensor>& tensors) {
  Structure s;
  s.kind = d.kind;
  if (d.kind == TypeKind::tensor) {
    auto t = to_host_tensor(d.tensor);
    if (!t) return std::unexpected(t.error());
    tensors[name] = std::move(*t);
    return s;
  }
  for (size_t i = 0; i < d.items.size(); ++i) {
    auto item = flatten(d.items[i], d.kind == TypeKind::sequence ? fmt::format("{}[{}]", name, i) : name, tensors);
    if (!item) return std::unexpected(item.error());
    s.items.push_back(std::move(*item));
  }
  return s;
}

Expected<ir::KgSizes> bound_sizes(std::string_view bytes,
                                  const std::map<std::string, ir::Shape>& shapes) {
  auto model = parse_model(bytes);
  if (!model) return std::unexpected(model.error());
  ir::KgSizes sizes;
  for (const ValueInfo& info : model->graph.inputs) {
    auto bound = shapes.find(info.name);
    if (bound == shapes.end() || !info.shape || info.shape->size() != bound->second.size())
      continue;
    for (size_t axis = 0; axis < info.shape->size(); ++axis)
      if (!(*info.shape)[axis].value)
        sizes.emplace(input_symbol(info.name, axis, (*info.shape)[axis]), bound->second[axis]);
  }
  return sizes;
}

Expected<ImportedModel> import_model_file(ir::Graph& g, const std::string& path,
                                          const ImportOptions& options) {
  auto bytes = ir::read_text_file(path);
  if (!bytes) return std::unexpected(bytes.error());
  auto m = import_model(g, *bytes, options);
  if (!m) return make_error(fmt::format("{}: {}", path, m.error().message));
  return m;
}

}  // namespace kiln::onnx
