// Lowering of a fused group to kernel IR: values, reductions, matmul, and the kernel's params.
#include "passes/lower.h"

#include "passes/collapse_domain.h"

#include <fmt/format.h>

#include <algorithm>

#include "passes/lower_context.h"

namespace kiln::passes {

namespace {

using ir::AttrKey;
using ir::Node;
using ir::Op;
using kir::Expr;

kir::Alu alu_of(Op op) {
  std::optional<kir::Alu> a = kir::alu_of(op);
  KILN_CHECK(a) << "not an elementwise op: " << ir::op_enum_name(op);
  return *a;
}

kir::ReduceOp reduce_op_of(Op op) {
  std::optional<ir::Reduction> r = ir::reduction_of(op);
  KILN_CHECK(r) << "not a reduction: " << ir::op_enum_name(op);
  return kir::reduce_op_of(*r);
}

std::string node_label(const Node* n) {
  if (n->op == Op::Input && !n->attrs.s(AttrKey::name).empty()) return n->attrs.s(AttrKey::name);
  return fmt::format("%t{}", n->id);
}

}  // namespace

const Expr* linearize(IndexBuilder& ib, const Index& idx, const ir::Shape& shape) {
  const Expr* flat = ib.constant(0);
  for (size_t k = 0; k < shape.size(); ++k) flat = ib.add(ib.mul(flat, shape[k]), idx[k]);
  return flat;
}

Index delinearize(IndexBuilder& ib, const Expr* flat, const ir::Shape& shape) {
  Index idx(shape.size());
  int64_t stride = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    idx[k] = shape[k] == 1 ? ib.constant(0) : ib.mod(ib.idiv(flat, stride), shape[k]);
    stride *= shape[k];
  }
  return idx;
}

Index broadcast_index(IndexBuilder& ib, const Index& idx, const ir::Shape& from) {
  Index out(from.size());
  size_t lead = idx.size() - from.size();
  for (size_t k = 0; k < from.size(); ++k) out[k] = from[k] == 1 ? ib.constant(0) : idx[lead + k];
  return out;
}

const Expr* LowerContext::known(const Node* n, const Index& idx) {
  // An empty tensor has no element to read: this expression sits in a loop of extent 0 and never
  // runs. Returning early keeps zero strides out of the index arithmetic.
  if (n->numel() == 0) return arena().constant(n->dtype, 0);
  auto it = memo_.find(std::make_pair(n, idx));
  return it == memo_.end() ? nullptr : it->second;
}

// Depth-first over the needs, on an explicit stack: a frame builds its value once every value it
// needs is known. Children are planned in the order the needs list them, so variables and
// expressions are created in the order a recursive descent would create them.
const Expr* LowerContext::emit(const Node* n, const Index& idx) {
  if (const Expr* e = known(n, idx)) return e;
  struct Frame {
    const Node* n;
    Index idx;
    NodeLowering l;
    size_t next = 0;
  };
  std::vector<Frame> stack;
  stack.push_back(Frame{n, idx, plan(n, idx)});
  while (true) {
    Frame& f = stack.back();
    if (f.next < f.l.needs.size()) {
      const auto& [c, ci] = f.l.needs[f.next++];
      if (!known(c, ci)) {
        NodeLowering l = plan(c, ci);  // before the push: `f`, `c` and `ci` refer into the stack
        stack.push_back(Frame{c, ci, std::move(l)});
      }
      continue;
    }
    std::vector<const Expr*> values;
    values.reserve(f.l.needs.size());
    for (const auto& [c, ci] : f.l.needs) values.push_back(known(c, ci));
    const Expr* e = f.l.build(values);
    memo_.emplace(std::make_pair(f.n, std::move(f.idx)), e);
    stack.pop_back();
    if (stack.empty()) return e;
  }
}

NodeLowering LowerContext::plan(const Node* n, const Index& idx) {
  if (auto it = buffers_.find(n); it != buffers_.end())
    return lowered(arena().load(it->second, n->dtype, linearize(ib_, idx, n->shape)));
  switch (ir::op_kind(n->op)) {
    case ir::OpKind::Elementwise:
      return plan_elementwise(n, idx);
    case ir::OpKind::Movement:
      return plan_movement(*this, n, idx);
    case ir::OpKind::Reduce:
      return n->op == Op::ArgMax || n->op == Op::ArgMin ? plan_arg_reduce(n, idx)
                                                        : plan_reduce(n, idx);
    case ir::OpKind::Matmul:
      return plan_matmul(n, idx);
    case ir::OpKind::Scan:
      return plan_scan(n, idx);
    case ir::OpKind::Source:
      return lowered(emit_source(n, idx));
    case ir::OpKind::Input:
      break;
  }
  fail(
      fmt::format("lower_group: graph input {} ({}{}) is read by the group but is not one of "
                  "its inputs",
                  node_label(n), ir::dtype_name(n->dtype), ir::shape_str(n->shape)));
  return lowered(arena().constant(n->dtype, 0));
}

NodeLowering LowerContext::plan_elementwise(const Node* n, const Index& idx) {
  NodeLowering l;
  l.needs.reserve(n->inputs.size());
  for (const Node* in : n->inputs) l.needs.emplace_back(in, broadcast_index(ib_, idx, in->shape));
  l.build = [this, n](const std::vector<const Expr*>& v) {
    return arena().alu(alu_of(n->op), n->dtype, v);
  };
  return l;
}

// The operand index of a reduction over `axes`: kept axes come from `idx`, reduced axes get
// fresh loop variables (appended to rvars/rextents, outer to inner).
// With `drop_ones`, a reduced axis of one element gets no variable: it is read at 0.
static Index reduce_operand_index(IndexBuilder& ib, const Index& idx, const ir::Shape& in_shape,
                                  const std::vector<int64_t>& axes, bool keepdim,
                                  std::vector<int32_t>& rvars, std::vector<int64_t>& rextents,
                                  bool drop_ones = false) {
  Index in(in_shape.size());
  size_t o = 0;
  for (size_t a = 0; a < in_shape.size(); ++a) {
    bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(a)) != axes.end();
    if (!reduced) {
      in[a] = idx[o++];
      continue;
    }
    if (drop_ones && in_shape[a] == 1) {
      in[a] = ib.constant(0);
      if (keepdim) ++o;
      continue;
    }
    int32_t v = ib.new_var(in_shape[a]);
    rvars.push_back(v);
    rextents.push_back(in_shape[a]);
    in[a] = ib.var(v);
    if (keepdim) ++o;
  }
  return in;
}

// How the cpu folds a reduction over `axes` of `in_shape` (kir::ReduceOrder): in lanes where its
// innermost reduced axis (the last one with a loop) is the operand's innermost but for axes of one
// element (a row, read contiguously from the operand's buffer), else in order. The same sum then
// adds in the same order whether its kernel reads the operand from a buffer or computes it (through
// a permute's strides, or with a loop of its own for an inlined reduction).
static kir::ReduceOrder reduce_order(const ir::Shape& in_shape, const std::vector<int64_t>& axes,
                                     bool drop_ones) {
  int64_t last = -1;
  for (int64_t a : axes)
    if (!drop_ones || in_shape[static_cast<size_t>(a)] != 1) last = std::max(last, a);
  if (last < 0) return kir::ReduceOrder::loads;
  for (size_t a = static_cast<size_t>(last) + 1; a < in_shape.size(); ++a)
    if (in_shape[a] != 1) return kir::ReduceOrder::in_order;
  return kir::ReduceOrder::lanes;
}

NodeLowering LowerContext::plan_reduce(const Node* n, const Index& idx) {
  const Node* x = n->inputs[0];
  std::vector<int32_t> rvars;
  std::vector<int64_t> rextents;
  // Axes of one element are no loops: a sum, product, max or min over them is one step from
  // the reduction's start, which the kernel computes where it is (a sum of one value is that
  // value, but a lone -0.0 sums to +0.0 from the start at +0.0). Left as a reduction, a matmul
  // sharing its kernel was no longer recognized as one, and a reduction around it read as a loop
  // with another inside, summed in order where lanes sum the same value read from a buffer: two
  // values for one sum by plan (RandomGraphFuzz.AValueIsTheSameWhicheverPlanComputesIt).
  const std::vector<int64_t>& axes = n->attrs.ints(AttrKey::axes);
  Index in = reduce_operand_index(ib_, idx, x->shape, axes, n->attrs.b(AttrKey::keepdim), rvars,
                                  rextents, /*drop_ones=*/true);
  NodeLowering l = forward(x, std::move(in));
  // A reduction over no axes (of a scalar) leaves every element as it is.
  if (axes.empty()) return l;
  if (rvars.empty()) {
    if (n->op == Op::Sum)
      l.build = [this, n](const std::vector<const Expr*>& v) {
        return arena().alu(kir::Alu::Add, n->dtype, {arena().constant(n->dtype, 0), v[0]});
      };
    return l;  // a product, max or min of one value is that value
  }
  l.build = [this, n, rvars = std::move(rvars), rextents = std::move(rextents),
             order = reduce_order(x->shape, axes, /*drop_ones=*/true)](
                const std::vector<const Expr*>& v) {
    return arena().reduce(reduce_op_of(n->op), n->dtype, v[0], rvars, rextents, {}, order);
  };
  return l;
}

NodeLowering LowerContext::plan_arg_reduce(const Node* n, const Index& idx) {
  const Node* x = n->inputs[0];
  std::vector<int32_t> rvars;
  std::vector<int64_t> rextents;
  Index in = reduce_operand_index(ib_, idx, x->shape, {n->attrs.i(AttrKey::axis)},
                                  n->attrs.b(AttrKey::keepdim), rvars, rextents);
  NodeLowering l = forward(x, std::move(in));
  l.build = [this, n, rvars = std::move(rvars), rextents = std::move(rextents),
             order = reduce_order(x->shape, {n->attrs.i(AttrKey::axis)}, /*drop_ones=*/false)](
                const std::vector<const Expr*>& v) {
    return arena().reduce(reduce_op_of(n->op), n->dtype, v[0], rvars, rextents, {}, order);
  };
  return l;
}

// out[b..., m, n] = sum_k a[b..., m, k] * b[b..., k, n], batch axes broadcast like elementwise.
NodeLowering LowerContext::plan_matmul(const Node* n, const Index& idx) {
  const Node* a = n->inputs[0];
  const Node* b = n->inputs[1];
  size_t ra = a->shape.size(), ro = n->shape.size();
  int64_t k_extent = a->shape[ra - 1];
  int32_t k = ib_.new_var(k_extent);
  const Expr* kv = ib_.var(k);
  Index batch(idx.begin(), idx.end() - 2);
  Index ai = broadcast_index(ib_, batch, ir::Shape(a->shape.begin(), a->shape.end() - 2));
  ai.push_back(idx[ro - 2]);
  ai.push_back(kv);
  Index bi = broadcast_index(ib_, batch, ir::Shape(b->shape.begin(), b->shape.end() - 2));
  bi.push_back(kv);
  bi.push_back(idx[ro - 1]);
  NodeLowering l;
  l.needs.emplace_back(a, std::move(ai));
  l.needs.emplace_back(b, std::move(bi));
  l.build = [this, n, k, k_extent](const std::vector<const Expr*>& v) {
    const Expr* body = arena().alu(kir::Alu::Mul, n->dtype, {v[0], v[1]});
    return arena().reduce(kir::ReduceOp::Sum, n->dtype, body, {k}, {k_extent});
  };
  return l;
}

// A scan is lowered only as its group's output, at the kernel's point: the scanned axis is the
// innermost domain variable t, walked in scan order (lower_group reverses the axis's index for a
// reverse scan), so step t reads the operand at the output's own index, or for an exclusive scan
// at the previous step's (0 at step 0, the index clamped into range).
NodeLowering LowerContext::plan_scan(const Node* n, const Index& idx) {
  const auto axis = static_cast<size_t>(n->attrs.i(AttrKey::axis));
  if (scan_var_ < 0 || idx[axis] != scan_axis_index_) {
    fail(
        fmt::format("lower_group: the scan {} is read inside its group (a scan's value is read "
                    "from a buffer)",
                    node_label(n)));
    return lowered(arena().constant(n->dtype, 0));
  }
  const Node* x = n->inputs[0];
  if (n->op == Op::TopKIndices) return plan_topk_indices(n, idx);
  const Expr* t = ib_.var(scan_var_);
  if (!n->attrs.b(AttrKey::exclusive)) {
    NodeLowering l = forward(x, idx);
    l.build = [this, n](const std::vector<const Expr*>& v) {
      return arena().scan(kir::ReduceOp::Sum, n->dtype, v[0], scan_var_);
    };
    return l;
  }
  const int64_t len = x->shape[axis];
  Index prev = idx;
  const Expr* back = ib_.sub(t, ib_.constant(1));  // the previous step, -1 at step 0
  if (n->attrs.b(AttrKey::reverse)) back = ib_.sub(ib_.constant(len - 1), back);
  prev[axis] =
      ib_.range(back).lo < 0 || ib_.range(back).hi >= len
          ? arena().alu(kir::Alu::Min, ir::DType::i64,
                        {arena().alu(kir::Alu::Max, ir::DType::i64, {back, ib_.constant(0)}),
                         ib_.constant(std::max<int64_t>(len - 1, 0))})
          : back;
  NodeLowering l;
  l.needs.emplace_back(x, std::move(prev));
  l.build = [this, n, t](const std::vector<const Expr*>& v) {
    const Expr* started = arena().alu(kir::Alu::Ge, ir::DType::boolean, {t, ib_.constant(1)});
    const Expr* body =
        arena().alu(kir::Alu::Where, n->dtype, {started, v[0], arena().constant(n->dtype, 0)});
    return arena().scan(kir::ReduceOp::Sum, n->dtype, body, scan_var_);
  };
  return l;
}

// Top-k's indices: the operand is read along the axis at a fresh variable r (all n positions per
// step), the other axes at the output's index; step t of the selection scan picks the t-th best.
NodeLowering LowerContext::plan_topk_indices(const Node* n, const Index& idx) {
  const auto axis = static_cast<size_t>(n->attrs.i(AttrKey::axis));
  const Node* x = n->inputs[0];
  const int64_t len = x->shape[axis];
  const int32_t r = ib_.new_var(len);
  Index in = idx;
  in[axis] = ib_.var(r);
  NodeLowering l = forward(x, std::move(in));
  const kir::ReduceOp op =
      n->attrs.b(AttrKey::largest) ? kir::ReduceOp::ArgMax : kir::ReduceOp::ArgMin;
  l.build = [this, op, r, len](const std::vector<const Expr*>& v) {
    return arena().select_scan(op, v[0], scan_var_, r, len);
  };
  return l;
}

const Expr* LowerContext::emit_source(const Node* n, const Index& idx) {
  if (n->op == Op::Full) {
    const ir::AttrValue* v = n->attrs.find(AttrKey::value);
    if (const int64_t* whole = std::get_if<int64_t>(v)) return arena().integer(n->dtype, *whole);
    return arena().constant(n->dtype, n->attrs.f(AttrKey::value));
  }
  // arange: element i = start + i*step, computed in i64 and converted to the node's dtype.
  const Expr* v =
      ib_.add(ib_.constant(n->attrs.i(AttrKey::start)), ib_.mul(idx[0], n->attrs.i(AttrKey::step)));
  if (n->dtype == ir::DType::i64) return v;
  return arena().alu(kir::Alu::Cast, n->dtype, {v});
}

namespace {

kir::Param make_param(const Node* n, bool output) {
  return kir::Param{.dtype = n->dtype, .shape = n->shape, .output = output, .label = node_label(n)};
}

// The group's scan, if it has one (an output: a scan's value is read from a buffer).
const Node* scan_of(const FusedGroup& group) {
  for (const Node* o : group.outputs)
    if (ir::op_kind(o->op) == ir::OpKind::Scan) return o;
  return nullptr;
}

// A scan kernel's domain (cumsum, topk_indices): the output's axes with the scanned one moved
// innermost, and a leading axis of 1 for a rank-1 output, so that the scanned axis is never the
// outermost (the one backends split between threads).
std::vector<int64_t> scan_domain(const Node* scan) {
  const auto axis = static_cast<size_t>(scan->attrs.i(AttrKey::axis));
  std::vector<int64_t> domain;
  if (scan->shape.size() == 1) domain.push_back(1);
  for (size_t d = 0; d < scan->shape.size(); ++d)
    if (d != axis) domain.push_back(scan->shape[d]);
  domain.push_back(scan->shape[axis]);
  return domain;
}

Expected<void> check_group(const FusedGroup& group, const std::string& name) {
  if (group.outputs.empty())
    return make_error(fmt::format("lower_group({}): the group has no outputs", name));
  const ir::Shape& shape = group.outputs[0]->shape;
  for (const Node* o : group.outputs)
    if (o->shape != shape)
      return make_error(fmt::format(
          "lower_group({}): outputs {}{} and {}{} differ in shape; a kernel writes one domain",
          name, node_label(group.outputs[0]), ir::shape_str(shape), node_label(o),
          ir::shape_str(o->shape)));
  if (const Node* scan = scan_of(group))
    for (const Node* o : group.outputs)
      if (ir::op_kind(o->op) == ir::OpKind::Scan && o->attrs != scan->attrs)
        return make_error(fmt::format(
            "lower_group({}): scans {} and {} run along different axes or directions; a kernel "
            "scans one way",
            name, node_label(scan), node_label(o)));
  return {};
}

}  // namespace

Expected<LoweredKernel> lower_group(const FusedGroup& group, const std::string& name) {
  if (Expected<void> ok = check_group(group, name); !ok) return std::unexpected(ok.error());
  LoweredKernel out;
  kir::Kernel& k = out.kernel;
  k.name = name;
  k.arena = std::make_shared<kir::ExprArena>();
  k.domain = group.outputs[0]->shape;
  std::unordered_map<const Node*, int32_t> buffers;
  for (const Node* in : group.inputs) {
    buffers.emplace(in, static_cast<int32_t>(k.params.size()));
    k.params.push_back(make_param(in, false));
    out.params.push_back(in);
  }
  const Node* scan = scan_of(group);
  if (scan) k.domain = scan_domain(scan);
  LowerContext cx(*k.arena, k.domain, std::move(buffers));
  Index point;
  if (!scan) {
    for (size_t d = 0; d < k.domain.size(); ++d)
      point.push_back(cx.ib().var(static_cast<int32_t>(d)));
  } else {
    // The scanned axis is the innermost domain variable; the other axes keep their order.
    const auto axis = static_cast<size_t>(scan->attrs.i(AttrKey::axis));
    const auto t = static_cast<int32_t>(k.domain.size()) - 1;
    int32_t next = scan->shape.size() == 1 ? 1 : 0;
    for (size_t d = 0; d < scan->shape.size(); ++d)
      point.push_back(d == axis ? cx.ib().var(t) : cx.ib().var(next++));
    if (scan->op == Op::CumSum && scan->attrs.b(AttrKey::reverse))
      point[axis] = cx.ib().sub(cx.ib().constant(scan->shape[axis] - 1), point[axis]);
    cx.set_scan_loop(t, point[axis]);
  }
  const Expr* store_index = linearize(cx.ib(), point, group.outputs[0]->shape);
  for (const Node* o : group.outputs) {
    auto buf = static_cast<int32_t>(k.params.size());
    k.params.push_back(make_param(o, true));
    out.params.push_back(o);
    k.stores.push_back(kir::Store{buf, store_index, cx.emit(o, point)});
  }
  if (!cx.error().empty()) return make_error(fmt::format("{} (kernel {})", cx.error(), name));
  out.kernel = collapse_domain(out.kernel);
  return out;
}

}  // namespace kiln::passes
