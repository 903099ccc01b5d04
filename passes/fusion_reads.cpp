// The reads of a fused node through inlined views, with the loop dependencies that decide how
// often the code generator evaluates each value read.
#include "passes/fusion_reads.h"

#include <algorithm>
#include <bit>
#include <set>
#include <tuple>

#include "kiln/error.h"

namespace kiln::passes {

namespace {

using ir::AttrKey;
using ir::Node;
using ir::Op;

// Bit i of an axis mask: the axis index depends on loop i of the reader's loop nest (loops
// outer to inner: the reader's axes, then its reduction or contraction loops).
using Mask = uint64_t;
using AxisMasks = std::vector<Mask>;

Mask bit(size_t loop) {
  return Mask{1} << std::min<size_t>(loop, 63);
}

// The loop nest of `n`: its own axes, then the loops of its reduction or contraction.
std::vector<int64_t> loop_extents(const Node* n) {
  std::vector<int64_t> ext(n->shape.begin(), n->shape.end());
  if (ir::is_reduce(n->op)) {
    const Node* x = n->inputs[0];
    if (n->op == Op::ArgMax || n->op == Op::ArgMin) {
      ext.push_back(x->shape[static_cast<size_t>(n->attrs.i(AttrKey::axis))]);
    } else {
      for (int64_t a : n->attrs.ints(AttrKey::axes))
        ext.push_back(x->shape[static_cast<size_t>(a)]);
    }
  } else if (n->op == Op::Matmul) {
    ext.push_back(n->inputs[0]->shape.back());
  } else if (n->op == Op::TopKIndices) {  // each step reads the whole row
    ext.push_back(n->inputs[0]->shape[static_cast<size_t>(n->attrs.i(AttrKey::axis))]);
  } else if (n->op == Op::ScatterElements) {
    ext.push_back(n->inputs[1]->shape[static_cast<size_t>(n->attrs.i(AttrKey::axis))]);
  }
  return ext;
}

AxisMasks own_axes(const Node* n) {
  AxisMasks m(n->shape.size());
  for (size_t k = 0; k < m.size(); ++k) m[k] = bit(k);
  return m;
}

// Right-aligned numpy broadcasting: size-1 operand axes read index 0.
AxisMasks broadcast_masks(const AxisMasks& out, const ir::Shape& from) {
  AxisMasks m(from.size(), 0);
  size_t lead = out.size() - from.size();
  for (size_t k = 0; k < from.size(); ++k)
    if (from[k] != 1) m[k] = out[lead + k];
  return m;
}

AxisMasks reduce_operand_masks(const Node* n, const Node* x) {
  std::vector<int64_t> axes = (n->op == Op::ArgMax || n->op == Op::ArgMin)
                                  ? std::vector<int64_t>{n->attrs.i(AttrKey::axis)}
                                  : n->attrs.ints(AttrKey::axes);
  bool keepdim = n->attrs.b(AttrKey::keepdim);
  AxisMasks m(x->shape.size(), 0);
  size_t o = 0, r = n->shape.size();
  for (size_t a = 0; a < x->shape.size(); ++a) {
    auto it = std::find(axes.begin(), axes.end(), static_cast<int64_t>(a));
    if (it == axes.end()) {
      m[a] = bit(o++);
      continue;
    }
    m[a] = bit(r + static_cast<size_t>(it - axes.begin()));
    if (keepdim) ++o;
  }
  return m;
}

// out[b..., m, n] = sum_k a[b..., m, k] * b[b..., k, n]; k is the loop after the output axes.
AxisMasks matmul_operand_masks(const Node* n, size_t operand) {
  const Node* x = n->inputs[operand];
  size_t ro = n->shape.size();
  AxisMasks out = own_axes(n);
  AxisMasks batch(out.begin(), out.end() - 2);
  AxisMasks m = broadcast_masks(batch, ir::Shape(x->shape.begin(), x->shape.end() - 2));
  if (operand == 0) {
    m.push_back(bit(ro - 2));
    m.push_back(bit(ro));
  } else {
    m.push_back(bit(ro));
    m.push_back(bit(ro - 1));
  }
  return m;
}

// Reshape: contiguous runs of axes with equal products map onto each other.
AxisMasks reshape_masks(const AxisMasks& out, const ir::Shape& out_shape, const ir::Shape& in) {
  AxisMasks m(in.size(), 0);
  size_t i = 0, j = 0;
  while (i < in.size() || j < out_shape.size()) {
    size_t i0 = i, j0 = j;
    int64_t pi = i < in.size() ? in[i++] : 1;
    int64_t po = j < out_shape.size() ? out_shape[j++] : 1;
    while (pi != po) {
      if ((pi < po && i < in.size()) || j >= out_shape.size()) {
        if (i >= in.size()) break;
        pi *= in[i++];
      } else {
        po *= out_shape[j++];
      }
    }
    Mask run = 0;
    for (size_t k = j0; k < j; ++k) run |= out[k];
    for (size_t k = i0; k < i; ++k) m[k] = run;
  }
  return m;
}

// Gather and gather_elements: the data operand's `axis` is the loaded index, which depends on
// every loop its index operand's axes depend on; its other axes keep the output's loop variables.
AxisMasks gather_masks(const Node* n, size_t operand, const AxisMasks& out) {
  auto axis = static_cast<size_t>(n->attrs.i(AttrKey::axis));
  const ir::Shape& idx = n->inputs[1]->shape;
  if (n->op == Op::GatherElements) {
    if (operand == 1) return out;
    AxisMasks m = out;
    for (Mask b : out) m[axis] |= b;
    return m;
  }
  auto first = out.begin() + static_cast<std::ptrdiff_t>(axis);
  AxisMasks at(first, first + static_cast<std::ptrdiff_t>(idx.size()));
  if (operand == 1) return at;
  AxisMasks m(out.begin(), first);
  m.push_back(0);
  for (Mask b : at) m.back() |= b;
  m.insert(m.end(), first + static_cast<std::ptrdiff_t>(idx.size()), out.end());
  return m;
}

// scatter_elements: data is read at the output's position; indices and updates at the output's
// position but along `axis`, which is the fold's loop (the loop after the output axes).
AxisMasks scatter_masks(const Node* n, size_t operand, const AxisMasks& out) {
  if (operand == 0) return out;
  AxisMasks m = out;
  m[static_cast<size_t>(n->attrs.i(AttrKey::axis))] = bit(n->shape.size());
  return m;
}

// The masks of input `operand` of movement op `n`, given the masks of n's own axes.
AxisMasks movement_masks(const Node* n, size_t operand, const AxisMasks& out) {
  const ir::Shape& in = n->inputs[operand]->shape;
  const std::optional<ir::Movement> m = ir::movement_of(n->op);
  KILN_CHECK(m) << "not a movement op: " << ir::op_enum_name(n->op);
  switch (*m) {
    case ir::Movement::Reshape:
      return reshape_masks(out, n->shape, in);
    case ir::Movement::Permute: {
      AxisMasks m(in.size(), 0);
      const std::vector<int64_t>& dims = n->attrs.ints(AttrKey::dims);
      for (size_t i = 0; i < dims.size(); ++i) m[static_cast<size_t>(dims[i])] = out[i];
      return m;
    }
    case ir::Movement::Expand:
      return broadcast_masks(out, in);
    case ir::Movement::Unfold: {
      AxisMasks u(out.begin(), out.end() - 1);
      u[static_cast<size_t>(n->attrs.i(AttrKey::dim))] |= out.back();
      return u;
    }
    case ir::Movement::Gather:
    case ir::Movement::GatherElements:
      return gather_masks(n, operand, out);
    case ir::Movement::ScatterElements:
      return scatter_masks(n, operand, out);
    case ir::Movement::Slice:  // these keep each axis's loop variable
    case ir::Movement::Pad:
    case ir::Movement::Flip:
    case ir::Movement::Roll:
    case ir::Movement::Concat:
    case ir::Movement::Trilu:
    case ir::Movement::Resize:  // its position along the axis comes from the reader's
      break;
  }
  return AxisMasks(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(in.size()));
}

AxisMasks operand_masks(const Node* n, size_t operand) {
  const Node* x = n->inputs[operand];
  switch (ir::op_kind(n->op)) {
    case ir::OpKind::Reduce:
      return reduce_operand_masks(n, x);
    case ir::OpKind::Matmul:
      return matmul_operand_masks(n, operand);
    case ir::OpKind::Movement:
      return movement_masks(n, operand, own_axes(n));
    case ir::OpKind::Scan:
      if (n->op == Op::TopKIndices) {  // the axis is read at the loop after the output axes
        AxisMasks m = own_axes(n);
        m[static_cast<size_t>(n->attrs.i(AttrKey::axis))] = bit(n->shape.size());
        return m;
      }
      break;                       // cumsum: the operand's own shape
    case ir::OpKind::Elementwise:  // numpy broadcasting
    case ir::OpKind::Source:
    case ir::OpKind::Input:
      break;
  }
  return broadcast_masks(own_axes(n), x->shape);
}

class ReadWalker {
 public:
  ReadWalker(const Node* reader, const std::function<bool(const Node*)>& stop)
      : extents_(loop_extents(reader)), stop_(stop) {}

  // Depth-first through movement ops, inputs left to right, on an explicit stack.
  void visit(const Node* m0, const AxisMasks& masks0, const Node* view0, const Node* reader0) {
    struct Visit {
      const Node* m;
      AxisMasks masks;
      const Node* view;
      const Node* reader;
    };
    std::vector<Visit> stack{{m0, masks0, view0, reader0}};
    while (!stack.empty()) {
      Visit v = std::move(stack.back());
      stack.pop_back();
      const Node* m = v.m;
      if (stop_(m)) {
        Mask used = 0;
        for (size_t k = 0; k < m->shape.size(); ++k)
          if (m->shape[k] != 1) used |= v.masks[k];
        if (!seen_.insert({m->id, v.view->id, used}).second) continue;
        reads_.push_back({m, v.reader, v.view, extra(m, used)});
        continue;
      }
      if (!ir::is_movement(m->op)) continue;  // an inlined source reads nothing
      bool single = m->inputs.size() == 1;
      // A gather's data operand is read at loaded positions: through a view of its own.
      bool gathers = m->op == Op::Gather || m->op == Op::GatherElements;
      for (size_t j = m->inputs.size(); j-- > 0;) {
        const Node* in = m->inputs[j];
        const Node* view = single ? v.view : gathers && j == 0 ? m : in;
        stack.push_back({in, movement_masks(m, j, v.masks), view, m});
      }
    }
  }

  std::vector<ValueRead> take() { return std::move(reads_); }

 private:
  double extra(const Node* base, Mask used) const {
    if (base->numel() == 0) return 0;
    double evaluations = 1;
    if (used != 0) {
      size_t deepest = 63 - static_cast<size_t>(std::countl_zero(used));
      for (size_t k = 0; k <= deepest && k < extents_.size(); ++k)
        evaluations *= static_cast<double>(extents_[k]);
    }
    return evaluations / static_cast<double>(base->numel());
  }

  std::vector<int64_t> extents_;
  const std::function<bool(const Node*)>& stop_;
  std::set<std::tuple<uint32_t, uint32_t, Mask>> seen_;
  std::vector<ValueRead> reads_;
};

}  // namespace

std::vector<ValueRead> collect_reads(const Node* n, const std::function<bool(const Node*)>& stop) {
  ReadWalker walker(n, stop);
  for (size_t i = 0; i < n->inputs.size(); ++i)
    walker.visit(n->inputs[i], operand_masks(n, i), n->inputs[i], n);
  return walker.take();
}

double node_flops(const Node* n) {
  auto numel = static_cast<double>(n->numel());
  switch (ir::op_kind(n->op)) {
    case ir::OpKind::Elementwise:
    case ir::OpKind::Source:
    case ir::OpKind::Scan:  // cumsum: one addition per element; topk: a pass over the row per step
      return ir::op_cost(n->op) * numel *
             (n->op == Op::TopKIndices
                  ? static_cast<double>(
                        n->inputs[0]->shape[static_cast<size_t>(n->attrs.i(AttrKey::axis))])
                  : 1.0);
    case ir::OpKind::Reduce:
      return ir::op_cost(n->op) * static_cast<double>(n->inputs[0]->numel());
    case ir::OpKind::Matmul:
      return ir::op_cost(n->op) * numel * static_cast<double>(n->inputs[0]->shape.back());
    case ir::OpKind::Movement:  // index arithmetic, but for scatter's fold over the axis
      if (n->op == Op::ScatterElements)
        return ir::op_cost(n->op) * numel *
               static_cast<double>(
                   n->inputs[1]->shape[static_cast<size_t>(n->attrs.i(AttrKey::axis))]);
      return 0;
    case ir::OpKind::Input:
      return 0;
  }
  return 0;
}

double node_bytes(const Node* n) {
  return static_cast<double>(n->numel()) * ir::dtype_size(n->dtype);
}

}  // namespace kiln::passes
