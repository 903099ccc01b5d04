// Sequences and optionals. kiln's graphs hold tensors only, so a sequence is an import-time list
// of values and an optional a list of one or none: every op here rearranges those lists, and
// positions, lengths and presence must be known at import. The tensors inside stay ordinary
// values (graph nodes or constants), so the fuser sees through SequenceAt, ConcatFromSequence and
// the rest. SequenceMap imports its body once per element (Context::subgraph).
#include <fmt/format.h>

#include "onnx/import_context.h"

namespace kiln::onnx {

namespace {

using ir::Node;

Value sequence_of(std::vector<Value> items, ir::DType dtype) {
  Value v;
  v.kind = TypeKind::sequence;
  v.dtype = dtype;
  v.items = std::move(items);
  return v;
}

Value i64_scalar(int64_t n) {
  ir::HostTensor t = ir::HostTensor::zeros(ir::DType::i64, {});
  std::memcpy(t.bytes.data(), &n, 8);
  return Context::constant(std::move(t));
}

Expected<Value*> sequence_in(Context& c, size_t i) {
  if (!c.has(i)) return c.fail(fmt::format("input {} is missing", i));
  Value& v = c.in(i);
  if (v.kind != TypeKind::sequence) return c.fail(fmt::format("input {} '{}' is not a sequence", i, c.node().inputs[i]));
  return &v;
}

Expected<Value> tensor_in(Context& c, size_t i) {
  if (!c.has(i)) return c.fail(fmt::format("input {} is missing", i));
  if (c.in(i).kind != TypeKind::tensor) return c.fail(fmt::format("input {} '{}' is not a tensor", i, c.node().inputs[i]));
  return c.in(i);
}

// A position input (a known scalar) in [-n, n) (or [-n, n] where `end_ok`), made non-negative.
Expected<int64_t> position(Context& c, size_t i, int64_t n, bool end_ok) {
  KILN_ONNX_TRY(std::vector<int64_t> p, c.ints(i, "position"));
  if (p.size() != 1) return c.fail("position must hold one value");
  const int64_t hi = end_ok ? n : n - 1;
  if (p[0] < -n || p[0] > hi)
    return c.fail(fmt::format("position {} is out of range for a sequence of {}", p[0], n));
  return p[0] < 0 ? p[0] + n : p[0];
}

Expected<ir::DType> dtype_attr(Context& c, std::string_view name, ir::DType fallback) {
  const AttributeProto* a = c.attr(name);
  if (!a) return fallback;
  auto t = onnx_dtype(static_cast<int32_t>(a->i));
  if (!t) return c.unsupported(t.error().message);
  return *t;
}

Outs sequence_empty(Context& c) {
  KILN_ONNX_TRY(ir::DType t, dtype_attr(c, "dtype", ir::DType::f32));
  return std::vector<Value>{sequence_of({}, t)};
}

Outs sequence_construct(Context& c) {
  std::vector<Value> items;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    KILN_ONNX_TRY(Value v, tensor_in(c, i));
    if (!items.empty() && v.dtype != items[0].dtype)
      return c.fail(fmt::format("input {} is {}, input 0 {}", i, ir::dtype_name(v.dtype), ir::dtype_name(items[0].dtype)));
    items.push_back(std::move(v));
  }
  if (items.empty()) return c.fail("SequenceConstruct needs at least one input");
  const ir::DType t = items[0].dtype;
  return std::vector<Value>{sequence_of(std::move(items), t)};
}

Outs sequence_insert(Context& c) {
  KILN_ONNX_TRY(Value* s, sequence_in(c, 0));
  KILN_ONNX_TRY(Value v, tensor_in(c, 1));
  if (!s->items.empty() && v.dtype != s->dtype)
    return c.fail(fmt::format("inserting {} into a sequence of {}", ir::dtype_name(v.dtype), ir::dtype_name(s->dtype)));
  const int64_t n = static_cast<int64_t>(s->items.size());
  int64_t at = n;
  if (c.has(2)) { KILN_ONNX_TRY(at, position(c, 2, n, true)); }
  std::vector<Value> items = s->items;
  items.insert(items.begin() + at, std::move(v));
  return std::vector<Value>{sequence_of(std::move(items), items.front().dtype)};
}

Outs sequence_erase(Context& c) {
  KILN_ONNX_TRY(Value* s, sequence_in(c, 0));
  const int64_t n = static_cast<int64_t>(s->items.size());
  if (n == 0) return c.fail("erasing from an empty sequence");
  int64_t at = n - 1;
  if (c.has(1)) { KILN_ONNX_TRY(at, position(c, 1, n, false)); }
  std::vector<Value> items = s->items;
  items.erase(items.begin() + at);
  return std::vector<Value>{sequence_of(std::move(items), s->dtype)};
}

Outs sequence_at(Context& c) {
  KILN_ONNX_TRY(Value* s, sequence_in(c, 0));
  KILN_ONNX_TRY(int64_t at, position(c, 1, static_cast<int64_t>(s->items.size()), false));
  return std::vector<Value>{s->items[static_cast<size_t>(at)]};
}

Outs sequence_length(Context& c) {
  KILN_ONNX_TRY(Value* s, sequence_in(c, 0));
  return std::vector<Value>{i64_scalar(static_cast<int64_t>(s->items.size()))};
}

Outs concat_from_sequence(Context& c) {
  KILN_ONNX_TRY(Value* s, sequence_in(c, 0));
  if (!c.attr("axis")) return c.fail("attribute axis is required");
  const int64_t axis = c.attr_i("axis", 0);
  const bool new_axis = c.attr_i("new_axis", 0) != 0;
  if (s->items.empty()) return c.fail("ConcatFromSequence of an empty sequence");
  std::vector<const Node*> parts;
  for (size_t i = 0; i < s->items.size(); ++i) {
    KILN_ONNX_TRY(const Node* n, c.materialize(s->items[i], fmt::format("{}[{}]", c.node().inputs[0], i)));
    if (new_axis) {
      const int64_t rank = static_cast<int64_t>(n->shape.size()) + 1;
      if (axis < -rank || axis >= rank) return c.fail(fmt::format("axis {} is out of range for rank {}", axis, rank));
      std::vector<int64_t> shape(n->shape.begin(), n->shape.end());
      shape.insert(shape.begin() + (axis < 0 ? axis + rank : axis), 1);
      KILN_ONNX_TRY(n, c.check(c.b().reshape(n, shape)));
    }
    parts.push_back(n);
  }
  const int64_t rank = static_cast<int64_t>(parts[0]->shape.size());
  if (axis < -rank || axis >= rank) return c.fail(fmt::format("axis {} is out of range for rank {}", axis, rank));
  return one(c, c.b().concat(parts, axis < 0 ? axis + rank : axis));
}

Outs split_to_sequence(Context& c) {
  KILN_ONNX_TRY(const Node* x, c.x(0));
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  int64_t axis = c.attr_i("axis", 0);
  if (axis < -rank || axis >= rank) return c.fail(fmt::format("axis {} is out of range for rank {}", axis, rank));
  if (axis < 0) axis += rank;
  const int64_t n = x->shape[static_cast<size_t>(axis)];
  const bool keepdims = c.attr_i("keepdims", 1) != 0;
  std::vector<int64_t> sizes;
  bool drop_axis = false;
  if (c.has(1)) {
    KILN_ONNX_TRY(sizes, c.ints(1, "split"));
    if (c.in(1).shape.empty()) {  // a scalar: chunks of that size, the last one shorter
      const int64_t chunk = sizes.at(0);
      if (chunk <= 0) return c.fail(fmt::format("split {} is not positive", chunk));
      sizes.clear();
      for (int64_t at = 0; at < n; at += chunk) sizes.push_back(std::min(chunk, n - at));
    }
  } else {
    sizes.assign(static_cast<size_t>(n), 1);
    drop_axis = !keepdims;
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return c.fail(fmt::format("split size {} is negative", s));
    total += s;
  }
  if (total != n) return c.fail(fmt::format("split sizes sum to {}, the axis holds {}", total, n));
  std::vector<Value> items;
  int64_t at = 0;
  for (int64_t s : sizes) {
    KILN_ONNX_TRY(const Node* part, c.check(c.b().slice(x, axis, at, at + s, 1)));
    if (drop_axis) {
      std::vector<int64_t> shape(part->shape.begin(), part->shape.end());
      shape.erase(shape.begin() + axis);
      KILN_ONNX_TRY(part, c.check(c.b().reshape(part, shape)));
    }
    items.push_back(c.out(part));
    at += s;
  }
  return std::vector<Value>{sequence_of(std::move(items), x->dtype)};
}

// SequenceMap(sequence, more...): the body once per element; the other inputs are sequences of
// the same length (their element) or tensors (as they are). Each output is a sequence.
Outs sequence_map(Context& c) {
  const AttributeProto* a = c.attr("body");
  if (!a || !a->g) return c.fail("SequenceMap needs the graph body");
  const GraphProto& body = *a->g;
  KILN_ONNX_TRY(Value* first, sequence_in(c, 0));
  const size_t n = first->items.size();
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    if (!c.has(i)) return c.fail(fmt::format("input {} is missing", i));
    if (c.in(i).kind == TypeKind::sequence && c.in(i).items.size() != n)
      return c.fail(fmt::format("input {} holds {} elements, input 0 {}", i, c.in(i).items.size(), n));
    if (c.in(i).kind == TypeKind::optional) return c.fail(fmt::format("input {} is an optional", i));
  }
  std::vector<std::vector<Value>> outs(body.outputs.size());
  for (size_t k = 0; k < n; ++k) {
    std::vector<Value> in;
    for (size_t i = 0; i < c.num_inputs(); ++i)
      in.push_back(c.in(i).kind == TypeKind::sequence ? c.in(i).items[k] : c.in(i));
    KILN_ONNX_TRY(std::vector<Value> out, c.subgraph(body, std::move(in), fmt::format("body, element {}", k)));
    for (size_t j = 0; j < out.size(); ++j) outs[j].push_back(std::move(out[j]));
  }
  std::vector<Value> results;
  for (size_t j = 0; j < outs.size(); ++j) {
    // An empty map's element type comes from the body's declared output.
    ir::DType t = ir::DType::f32;
    if (!outs[j].empty()) t = outs[j][0].dtype;
    else if (auto d = onnx_dtype(body.outputs[j].elem_type)) t = *d;
    results.push_back(sequence_of(std::move(outs[j]), t));
  }
  return results;
}

// Optional(input) holds the input; Optional() with a `type` attribute holds none.
Outs optional(Context& c) {
  Value v;
  v.kind = TypeKind::optional;
  if (c.has(0)) {
    v.dtype = c.in(0).dtype;
    v.items.push_back(c.in(0));
  } else if (!c.attr("type")) {
    return c.fail("an empty Optional needs the attribute type");
  }
  return std::vector<Value>{std::move(v)};
}

Outs optional_has_element(Context& c) {
  bool has = c.has(0) && (c.in(0).kind != TypeKind::optional || !c.in(0).items.empty());
  ir::HostTensor t = ir::HostTensor::zeros(ir::DType::boolean, {});
  t.set(0, has ? 1 : 0);
  return std::vector<Value>{Context::constant(std::move(t))};
}

Outs optional_get_element(Context& c) {
  if (!c.has(0)) return c.fail("input 0 is missing");
  Value& v = c.in(0);
  if (v.kind != TypeKind::optional) return std::vector<Value>{v};
  if (v.items.empty()) return c.fail(fmt::format("the optional '{}' holds no value", c.node().inputs[0]));
  return std::vector<Value>{v.items[0]};
}

}  // namespace

void add_sequence_ops(OpTable& t) {
  t["SequenceEmpty"] = sequence_empty;
  t["SequenceConstruct"] = sequence_construct;
  t["SequenceInsert"] = sequence_insert;
  t["SequenceErase"] = sequence_erase;
  t["SequenceAt"] = sequence_at;
  t["SequenceLength"] = sequence_length;
  t["ConcatFromSequence"] = concat_from_sequence;
  t["SplitToSequence"] = split_to_sequence;
  t["SequenceMap"] = sequence_map;
  t["Optional"] = optional;
  t["OptionalHasElement"] = optional_has_element;
  t["OptionalGetElement"] = optional_get_element;
}

}  // namespace kiln::onnx
