// Control flow: If, Loop and Scan, imported by specializing them at import time. kiln's graphs
// have no control flow of their own (every kernel is a fixed loop nest), so:
// - If imports the branch its condition selects; the condition must be known at import (a
//   constant, or computed from constants and the inputs given values);
// - Loop is unrolled: its trip count and conditions must be known at import, and each iteration
//   imports the body once (at most kMaxUnrolled iterations);
// - Scan is unrolled over its (static) sequence length.
// Each unrolled body is ordinary graph nodes, so the fuser sees through the iterations. Values the
// body computes from constants alone are evaluated at import, like the model's own.
#include <fmt/format.h>

#include <cstring>

#include "onnx/import_context.h"

namespace kiln::onnx {

namespace {

using ir::Node;

const GraphProto* graph_attr(Context& c, std::string_view name) {
  const AttributeProto* a = c.attr(name);
  return a && a->g ? a->g.get() : nullptr;
}

Value scalar_constant(ir::DType dtype, double v) {
  ir::HostTensor t = ir::HostTensor::zeros(dtype, {});
  t.set(0, v);
  return Context::constant(std::move(t));
}

// Whether a known scalar condition holds.
Expected<bool> condition(Context& c, Value& v, std::string_view what) {
  if (!c.known(v))
    return c.unsupported(fmt::format(
        "{} must be known at import (a constant, or computed from constants and inputs given "
        "values): kiln imports control flow by specializing it",
        what));
  if (v.data->numel() != 1) return c.fail(fmt::format("{} must hold one value", what));
  return v.data->get(0) != 0;
}

// Stacks equal-shaped values along a new leading axis (Loop's and Scan's scan outputs), then moves
// that axis to `axis`; `reverse` stacks them last first. Known values stack at import.
Expected<Value> stack(Context& c, std::vector<Value>& parts, int64_t axis, bool reverse,
                      const std::string& name) {
  const ir::Shape& shape = parts.front().shape;
  const ir::DType dtype = parts.front().dtype;
  for (const Value& p : parts)
    if (p.shape != shape || p.dtype != dtype)
      return c.fail(fmt::format("scan output '{}' changes from {}{} to {}{} between iterations", name,
                                ir::dtype_name(dtype), ir::shape_str(shape), ir::dtype_name(p.dtype),
                                ir::shape_str(p.shape)));
  const int64_t rank = static_cast<int64_t>(shape.size()) + 1;
  if (axis < -rank || axis >= rank)
    return c.fail(fmt::format("scan output axis {} is out of range for rank {}", axis, rank));
  if (axis < 0) axis += rank;
  if (reverse) std::reverse(parts.begin(), parts.end());

  ir::Shape stacked = shape;
  stacked.insert(stacked.begin(), static_cast<int64_t>(parts.size()));
  bool all_known = true, all_folded = true;
  for (Value& p : parts) {
    all_known &= p.data.has_value();
    all_folded &= p.folded;
  }
  Value out;
  if (all_known) {
    ir::HostTensor t = ir::HostTensor::zeros(dtype, stacked);
    size_t at = 0;
    for (const Value& p : parts) {
      std::memcpy(t.bytes.data() + at, p.data->bytes.data(), p.data->bytes.size());
      at += p.data->bytes.size();
    }
    out = Context::constant(std::move(t));
    out.folded = all_folded;
    if (axis == 0) return out;
  } else {
    std::vector<const Node*> rows;
    std::vector<int64_t> one_more(stacked.begin(), stacked.end());
    one_more[0] = 1;
    for (Value& p : parts) {
      KILN_ONNX_TRY(const Node* n, c.materialize(p, name));
      KILN_ONNX_TRY(n, c.check(c.b().reshape(n, one_more)));
      rows.push_back(n);
    }
    KILN_ONNX_TRY(const Node* n, c.check(c.b().concat(rows, 0)));
    if (axis == 0) return c.out(n);
    out = c.out(n);
  }
  std::vector<int64_t> perm;
  for (int64_t d = 1; d <= axis; ++d) perm.push_back(d);
  perm.push_back(0);
  for (int64_t d = axis + 1; d < rank; ++d) perm.push_back(d);
  KILN_ONNX_TRY(const Node* n, c.materialize(out, name));
  KILN_ONNX_TRY(n, c.check(c.b().permute(n, perm)));
  return c.out(n);
}

Outs import_if(Context& c) {
  const GraphProto* then_branch = graph_attr(c, "then_branch");
  const GraphProto* else_branch = graph_attr(c, "else_branch");
  if (!then_branch || !else_branch) return c.fail("If needs the graphs then_branch and else_branch");
  if (!c.has(0)) return c.fail("input 0 (cond) is missing");
  KILN_ONNX_TRY(bool take, condition(c, c.in(0), "If's condition"));
  KILN_ONNX_TRY(std::vector<Value> outs, c.subgraph(take ? *then_branch : *else_branch, {},
                                                    take ? "then_branch" : "else_branch"));
  if (outs.size() != c.num_outputs())
    return c.fail(fmt::format("its {} has {} outputs, the node {}", take ? "then_branch" : "else_branch",
                              outs.size(), c.num_outputs()));
  return outs;
}

// Loop(M, cond, v_initial...): body(iteration_num, cond, v...) -> (cond, v..., scan outputs...).
Outs import_loop(Context& c) {
  const GraphProto* body = graph_attr(c, "body");
  if (!body) return c.fail("Loop needs the graph body");
  const size_t carried = c.num_inputs() > 2 ? c.num_inputs() - 2 : 0;
  if (body->inputs.size() != carried + 2)
    return c.fail(fmt::format("its body takes {} inputs; Loop gives iteration_num, cond and {} loop-carried values",
                              body->inputs.size(), carried));
  if (body->outputs.size() < carried + 1)
    return c.fail(fmt::format("its body has {} outputs: fewer than cond and {} loop-carried values",
                              body->outputs.size(), carried));
  const size_t scans = body->outputs.size() - 1 - carried;

  std::optional<int64_t> trips;
  if (c.has(0)) {
    KILN_ONNX_TRY(std::vector<int64_t> m, c.ints(0, "M, the trip count"));
    if (m.size() != 1) return c.fail("M (the trip count) must hold one value");
    trips = m[0];
  }
  bool go = true;
  if (c.has(1)) {
    KILN_ONNX_TRY(go, condition(c, c.in(1), "Loop's condition input"));
  }
  std::vector<Value> state;
  for (size_t k = 0; k < carried; ++k) {
    if (!c.has(2 + k)) return c.fail(fmt::format("loop-carried input {} is missing", 2 + k));
    state.push_back(c.in(2 + k));
  }

  std::vector<std::vector<Value>> scanned(scans);
  for (int64_t it = 0; go && (!trips || it < *trips); ++it) {
    if (it == kMaxUnrolled)
      return c.unsupported(fmt::format("Loop runs more than {} iterations (kiln unrolls loops at import)", kMaxUnrolled));
    std::vector<Value> in;
    in.push_back(scalar_constant(ir::DType::i64, static_cast<double>(it)));
    in.push_back(scalar_constant(ir::DType::boolean, 1));
    in.insert(in.end(), state.begin(), state.end());
    KILN_ONNX_TRY(std::vector<Value> out, c.subgraph(*body, std::move(in), fmt::format("body, iteration {}", it)));
    KILN_ONNX_TRY(go, condition(c, out[0], fmt::format("the body's condition output (iteration {})", it)));
    for (size_t k = 0; k < carried; ++k) state[k] = std::move(out[1 + k]);
    for (size_t k = 0; k < scans; ++k) scanned[k].push_back(std::move(out[1 + carried + k]));
  }

  std::vector<Value> results = std::move(state);
  for (size_t k = 0; k < scans; ++k) {
    const std::string& name = body->outputs[1 + carried + k].name;
    if (scanned[k].empty())
      return c.unsupported(fmt::format("Loop runs no iteration, so its scan output '{}' has no shape", name));
    KILN_ONNX_TRY(Value v, stack(c, scanned[k], 0, false, name));
    results.push_back(std::move(v));
  }
  return results;
}

// One of Scan's per-input or per-output attribute lists, `count` long (default all 0).
Expected<std::vector<int64_t>> per_tensor(Context& c, std::string_view name, size_t count) {
  auto v = c.attr_ints(name);
  if (!v) return std::vector<int64_t>(count, 0);
  if (v->size() != count)
    return c.fail(fmt::format("attribute {} has {} entries for {} tensors", name, v->size(), count));
  return *v;
}

// Element t of x along `axis`, without that axis.
Expected<Value> slice_at(Context& c, Value& x, int64_t axis, int64_t t, const std::string& name) {
  KILN_ONNX_TRY(const Node* n, c.materialize(x, name));
  KILN_ONNX_TRY(n, c.check(c.b().slice(n, axis, t, t + 1, 1)));
  std::vector<int64_t> shape(x.shape.begin(), x.shape.end());
  shape.erase(shape.begin() + axis);
  KILN_ONNX_TRY(n, c.check(c.b().reshape(n, shape)));
  return c.out(n);
}

// Scan (opset 9+): inputs (states..., scan inputs...), body(states..., scan slices...) ->
// (states..., scan output slices...). Opset 8 adds sequence_lens first and a batch axis 0 on every
// input, which is unrolled too.
Outs import_scan(Context& c) {
  const GraphProto* body = graph_attr(c, "body");
  if (!body) return c.fail("Scan needs the graph body");
  const int64_t m = c.attr_i("num_scan_inputs", -1);
  const bool batched = c.opset() < 9;
  const size_t first = batched ? 1 : 0;
  const size_t n_in = c.num_inputs() - first;
  if (m < 1 || static_cast<size_t>(m) > n_in)
    return c.fail(fmt::format("num_scan_inputs {} is out of range for {} inputs", m, n_in));
  const size_t n_scan = static_cast<size_t>(m), n_state = n_in - n_scan;
  if (body->inputs.size() != n_in)
    return c.fail(fmt::format("its body takes {} inputs; Scan gives {}", body->inputs.size(), n_in));
  if (body->outputs.size() < n_state)
    return c.fail(fmt::format("its body has {} outputs: fewer than the {} state variables", body->outputs.size(), n_state));
  const size_t n_out = body->outputs.size() - n_state;

  std::vector<int64_t> in_axes(n_scan, 0), in_dirs, out_axes(n_out, 0), out_dirs;
  if (batched) {
    KILN_ONNX_TRY(in_dirs, per_tensor(c, "directions", n_scan));
    out_dirs.assign(n_out, 0);
  } else {
    KILN_ONNX_TRY(in_axes, per_tensor(c, "scan_input_axes", n_scan));
    KILN_ONNX_TRY(in_dirs, per_tensor(c, "scan_input_directions", n_scan));
    KILN_ONNX_TRY(out_axes, per_tensor(c, "scan_output_axes", n_out));
    KILN_ONNX_TRY(out_dirs, per_tensor(c, "scan_output_directions", n_out));
  }
  std::vector<Value*> ins;
  for (size_t i = 0; i < n_in; ++i) {
    if (!c.has(first + i)) return c.fail(fmt::format("input {} is missing", first + i));
    ins.push_back(&c.in(first + i));
  }
  // Each scan input's axis (past the batch axis for opset 8) and the common sequence length.
  const int64_t lead = batched ? 1 : 0;
  int64_t length = -1;
  for (size_t k = 0; k < n_scan; ++k) {
    Value& x = *ins[n_state + k];
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    int64_t& a = in_axes[k];
    if (a < -(rank - lead) || a >= rank - lead)
      return c.fail(fmt::format("scan input {} axis {} is out of range for rank {}", k, a, rank));
    a = (a < 0 ? a + rank - lead : a) + lead;
    if (length >= 0 && x.shape[a] != length)
      return c.fail(fmt::format("scan inputs have sequence lengths {} and {}", length, x.shape[a]));
    length = x.shape[a];
  }
  if (length * (batched ? std::max<int64_t>(ins[0]->shape.empty() ? 1 : ins[0]->shape[0], 1) : 1) > kMaxUnrolled)
    return c.unsupported(fmt::format("Scan runs more than {} iterations (kiln unrolls scans at import)", kMaxUnrolled));
  if (batched && c.has(0)) {
    KILN_ONNX_TRY(std::vector<int64_t> lens, c.ints(0, "sequence_lens"));
    for (int64_t l : lens)
      if (l != length)
        return c.unsupported(fmt::format("sequence_lens {} shorter than the sequence ({})", l, length));
  }
  const int64_t batch = batched ? (ins[0]->shape.empty() ? 0 : ins[0]->shape[0]) : 1;
  if (batched)
    for (Value* v : ins)
      if (v->shape.empty() || v->shape[0] != batch) return c.fail("every input needs the same batch axis 0");
  if (length == 0 || batch == 0) return c.unsupported("a Scan over an empty sequence");

  // Per state variable and per scan output, one value per batch entry (one in all from opset 9).
  std::vector<std::vector<Value>> states(n_state), outs(n_out);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Value> state, xs;
    for (size_t i = 0; i < n_in; ++i) {
      Value v = *ins[i];
      if (batched) {
        KILN_ONNX_TRY(v, slice_at(c, *ins[i], 0, b, c.node().inputs[first + i]));
      }
      (i < n_state ? state : xs).push_back(std::move(v));
    }
    std::vector<std::vector<Value>> steps(n_out);
    for (int64_t t = 0; t < length; ++t) {
      std::vector<Value> in = state;
      for (size_t k = 0; k < n_scan; ++k) {
        const int64_t at = in_dirs[k] ? length - 1 - t : t;
        KILN_ONNX_TRY(Value v, slice_at(c, xs[k], in_axes[k] - lead, at, c.node().inputs[first + n_state + k]));
        in.push_back(std::move(v));
      }
      KILN_ONNX_TRY(std::vector<Value> out,
                    c.subgraph(*body, std::move(in), batched ? fmt::format("body, batch {} step {}", b, t)
                                                            : fmt::format("body, step {}", t)));
      for (size_t k = 0; k < n_state; ++k) state[k] = std::move(out[k]);
      for (size_t k = 0; k < n_out; ++k) steps[k].push_back(std::move(out[n_state + k]));
    }
    for (size_t k = 0; k < n_state; ++k) states[k].push_back(std::move(state[k]));
    for (size_t k = 0; k < n_out; ++k) {
      KILN_ONNX_TRY(Value v, stack(c, steps[k], out_axes[k], out_dirs[k] != 0, body->outputs[n_state + k].name));
      outs[k].push_back(std::move(v));
    }
  }
  // Opset 8's states and scan outputs get their batch axis back.
  std::vector<Value> results;
  for (size_t k = 0; k < n_state + n_out; ++k) {
    std::vector<Value>& per_batch = k < n_state ? states[k] : outs[k - n_state];
    if (!batched) {
      results.push_back(std::move(per_batch.front()));
      continue;
    }
    KILN_ONNX_TRY(Value v, stack(c, per_batch, 0, false, body->outputs[k].name));
    results.push_back(std::move(v));
  }
  return results;
}

}  // namespace

void add_control_ops(OpTable& t) {
  t["If"] = import_if;
  t["Loop"] = import_loop;
  t["Scan"] = import_scan;
}

}  // namespace kiln::onnx
