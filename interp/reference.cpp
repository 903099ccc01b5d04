// The reference device: evaluates graph IR nodes one by one in double precision, i64 exactly (the
// oracle).
#include "interp/reference.h"

#include <fmt/format.h>

#include <cstring>

#include "interp/reference_ops.h"
#include "interp/reference_value.h"

namespace kiln::interp {

namespace {

using ir::AttrKey;
using ir::HostTensor;
using ir::Node;
using ir::Op;
using reference::Value;

std::string describe_input(const Node& n) {
  const std::string& name = n.attrs.s(AttrKey::name);
  const int64_t slot = n.attrs.i(AttrKey::slot);
  if (name.empty()) return fmt::format("input slot {}", slot);
  return fmt::format("input '{}' (slot {})", name, slot);
}

std::string describe_type(ir::DType dtype, const ir::Shape& shape) {
  return fmt::format("{}{}", ir::dtype_name(dtype), ir::shape_str(shape));
}

Expected<Value> bind_input(const Node& n,
                           const std::unordered_map<const Node*, HostTensor>& inputs) {
  auto it = inputs.find(&n);
  if (it == inputs.end())
    return make_error(fmt::format("reference: {} is not bound (expected {})", describe_input(n),
                                  describe_type(n.dtype, n.shape)));
  const HostTensor& t = it->second;
  if (t.dtype != n.dtype || t.shape != n.shape)
    return make_error(fmt::format("reference: {}: expected {}, given {}", describe_input(n),
                                  describe_type(n.dtype, n.shape),
                                  describe_type(t.dtype, t.shape)));
  const int64_t want = n.numel() * ir::dtype_size(n.dtype);
  if (static_cast<int64_t>(t.bytes.size()) != want)
    return make_error(fmt::format("reference: {}: {} needs {} bytes, given {}", describe_input(n),
                                  describe_type(t.dtype, t.shape), want, t.bytes.size()));
  Value v = reference::make_value(n.dtype, n.shape);
  if (reference::make_exact(v)) {
    for (int64_t i = 0; i < v.numel(); ++i) reference::set_int(v, i, t.get_int(i));
    return v;
  }
  for (int64_t i = 0; i < v.numel(); ++i) v.data[i] = t.get(i);
  return v;
}

// Full and Arange: the value is stored at full precision (no rounding to a float dtype).
Value eval_source(const Node& n) {
  Value v = reference::make_value(n.dtype, n.shape);
  const bool exact = reference::make_exact(v);
  if (n.op == Op::Full) {
    const ir::AttrValue* attr = n.attrs.find(AttrKey::value);
    if (const int64_t* whole = std::get_if<int64_t>(attr); whole && exact) {
      for (int64_t i = 0; i < v.numel(); ++i) reference::set_int(v, i, *whole);
      return v;
    }
    const double value = reference::normalize(n.attrs.f(AttrKey::value), n.dtype);
    v.data.assign(v.data.size(), value);
    if (exact) v.ints.assign(v.ints.size(), reference::to_int64(value));
    return v;
  }
  // start + i * step in int64, wrapping as the kernels' i64 arithmetic does.
  const auto start = static_cast<uint64_t>(n.attrs.i(AttrKey::start));
  const auto step = static_cast<uint64_t>(n.attrs.i(AttrKey::step));
  for (int64_t i = 0; i < v.numel(); ++i) {
    const auto x = static_cast<int64_t>(start + static_cast<uint64_t>(i) * step);
    if (exact)
      reference::set_int(v, i, x);
    else
      v.data[i] = reference::normalize(static_cast<double>(x), n.dtype);
  }
  return v;
}

Expected<Value> eval_node(const Node& n, const reference::Args& args,
                          const std::unordered_map<const Node*, HostTensor>& inputs) {
  switch (ir::op_kind(n.op)) {
    case ir::OpKind::Elementwise:
      return reference::eval_elementwise(n, args);
    case ir::OpKind::Reduce:
      return reference::eval_reduce(n, *args.at(0));
    case ir::OpKind::Movement:
      return reference::eval_movement(n, args);
    case ir::OpKind::Matmul:
      return reference::eval_matmul(n, *args.at(0), *args.at(1));
    case ir::OpKind::Scan:
      return reference::eval_scan(n, *args.at(0));
    case ir::OpKind::Source:
      return eval_source(n);
    case ir::OpKind::Input:
      return bind_input(n, inputs);
  }
  KILN_CHECK(false) << "unknown op " << static_cast<int>(n.op);
  return {};
}

HostTensor to_host(const Value& v) {
  HostTensor t = HostTensor::zeros(v.dtype, v.shape);
  if (v.exact()) {
    std::memcpy(t.bytes.data(), v.ints.data(), v.ints.size() * sizeof(int64_t));
    return t;
  }
  for (int64_t i = 0; i < v.numel(); ++i) t.set(i, v.data[i]);
  return t;
}

}  // namespace

Expected<std::vector<HostTensor>> evaluate_reference(
    const std::vector<const Node*>& outputs,
    const std::unordered_map<const Node*, HostTensor>& inputs) {
  const std::vector<const Node*> order = ir::topo_order(outputs);
  // Count readers so that intermediates are freed after their last one has run.
  std::unordered_map<const Node*, int64_t> readers;
  for (const Node* n : order)
    for (const Node* in : n->inputs) ++readers[in];
  for (const Node* n : outputs) readers[n] = -1;  // never freed

  std::unordered_map<const Node*, Value> values;
  for (const Node* n : order) {
    reference::Args args;
    for (const Node* in : n->inputs) args.push_back(&values.at(in));
    Expected<Value> v = eval_node(*n, args, inputs);
    if (!v) return std::unexpected(v.error());
    KILN_CHECK(v->dtype == n->dtype && v->shape == n->shape) << ir::op_enum_name(n->op);
    for (const Node* in : n->inputs)
      if (--readers[in] == 0) values.erase(in);
    values.emplace(n, std::move(*v));
  }

  std::vector<HostTensor> results;
  for (const Node* n : outputs) results.push_back(to_host(values.at(n)));
  return results;
}

}  // namespace kiln::interp
