// ONNX's recurrent layers (RNN, GRU, LSTM) unrolled over their sequence, whose length is part of
// the input's static shape: the input projection of every step is one matmul, then each step is a
// matmul with the recurrent weights and the gates' elementwise math. Directions forward, reverse
// and bidirectional; layouts 0 and 1; optional bias, initial states, peepholes, clip, the
// activation functions ONNX lists, and sequence_lens (steps past a batch entry's length keep its
// state and output zeros; a reverse direction needs every length equal to the sequence's).
#include <fmt/format.h>

#include <algorithm>

#include "onnx/import_context.h"

namespace kiln::onnx {

namespace {

using ir::Node;
using ir::Op;

enum class Cell { rnn, gru, lstm };

struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

// An activation with ONNX's defaults for alpha and beta, or the next of the given lists.
Expected<Activation> activation(Context& c, const std::string& name, size_t& next_alpha, size_t& next_beta) {
  const auto alphas = c.attr_floats("activation_alpha").value_or(std::vector<float>{});
  const auto betas = c.attr_floats("activation_beta").value_or(std::vector<float>{});
  auto take = [](const std::vector<float>& list, size_t& next, double fallback) {
    return next < list.size() ? double(list[next++]) : fallback;
  };
  Activation a{name};
  if (name == "Tanh" || name == "Sigmoid" || name == "Relu" || name == "Softsign" || name == "Softplus") return a;
  if (name == "LeakyRelu") {
    a.alpha = take(alphas, next_alpha, 0.01);
  } else if (name == "ThresholdedRelu" || name == "Elu") {
    a.alpha = take(alphas, next_alpha, 1.0);
  } else if (name == "HardSigmoid") {
    a.alpha = take(alphas, next_alpha, 0.2);
    a.beta = take(betas, next_beta, 0.5);
  } else if (name == "Affine" || name == "ScaledTanh") {
    a.alpha = take(alphas, next_alpha, 1.0);
    a.beta = take(betas, next_beta, name == "Affine" ? 0.0 : 1.0);
  } else {
    return c.unsupported(fmt::format("activation '{}'", name));
  }
  return a;
}

Expected<const Node*> activate(Context& c, const Activation& a, const Node* x) {
  Expr e{c};
  ir::Builder& B = c.b();
  if (a.name == "Tanh") return e.un(Op::Tanh, x);
  if (a.name == "Sigmoid") return e.un(Op::Sigmoid, x);
  if (a.name == "Relu") return e.un(Op::Relu, x);
  if (a.name == "Affine") {
    KILN_ONNX_TRY(const Node* y, e.bin(Op::Mul, x, a.alpha));
    return e.bin(Op::Add, y, a.beta);
  }
  if (a.name == "ScaledTanh") {
    KILN_ONNX_TRY(const Node* y, e.bin(Op::Mul, x, a.beta));
    KILN_ONNX_TRY(y, e.un(Op::Tanh, y));
    return e.bin(Op::Mul, y, a.alpha);
  }
  if (a.name == "LeakyRelu") {
    KILN_ONNX_TRY(const Node* neg, e.bin(Op::Mul, x, a.alpha));
    KILN_ONNX_TRY(const Node* pos, e.bin(Op::Gt, x, 0.0));
    return c.check(B.where(pos, x, neg));
  }
  if (a.name == "ThresholdedRelu") {
    KILN_ONNX_TRY(const Node* on, e.bin(Op::Gt, x, a.alpha));
    KILN_ONNX_TRY(const Node* zero, e.k(0, x->dtype));
    return c.check(B.where(on, x, zero));
  }
  if (a.name == "HardSigmoid") {
    KILN_ONNX_TRY(const Node* y, e.bin(Op::Mul, x, a.alpha));
    KILN_ONNX_TRY(y, e.bin(Op::Add, y, a.beta));
    KILN_ONNX_TRY(y, e.bin(Op::Max, y, 0.0));
    return e.bin(Op::Min, y, 1.0);
  }
  if (a.name == "Elu") {  // x > 0 ? x : alpha * (exp(x) - 1)
    KILN_ONNX_TRY(const Node* ex, e.un(Op::Exp, x));
    KILN_ONNX_TRY(ex, e.bin(Op::Sub, ex, 1.0));
    KILN_ONNX_TRY(ex, e.bin(Op::Mul, ex, a.alpha));
    KILN_ONNX_TRY(const Node* pos, e.bin(Op::Gt, x, 0.0));
    return c.check(B.where(pos, x, ex));
  }
  if (a.name == "Softsign") {  // x / (1 + |x|)
    KILN_ONNX_TRY(const Node* d, e.un(Op::Abs, x));
    KILN_ONNX_TRY(d, e.bin(Op::Add, d, 1.0));
    return e.bin(Op::Div, x, d);
  }
  return stable_softplus(c, x);  // log(1 + exp(x))
}

// Gate k (of width h) of a [batch, gates * h] tensor.
Expected<const Node*> gate(Context& c, const Node* x, int64_t k, int64_t h) {
  return c.check(c.b().slice(x, 1, k * h, (k + 1) * h, 1));
}

// [n, ...] -> the n-th slice of axis 0 without it.
Expected<const Node*> at(Context& c, const Node* x, int64_t i) {
  KILN_ONNX_TRY(const Node* s, c.check(c.b().slice(x, 0, i, i + 1, 1)));
  return c.check(c.b().reshape(s, std::vector<int64_t>(x->shape.begin() + 1, x->shape.end())));
}

// xs, each [...], stacked along a new axis 0.
Expected<const Node*> stack(Context& c, const std::vector<const Node*>& xs) {
  std::vector<const Node*> rows;
  for (const Node* x : xs) {
    std::vector<int64_t> s{1};
    s.insert(s.end(), x->shape.begin(), x->shape.end());
    KILN_ONNX_TRY(const Node* r, c.check(c.b().reshape(x, s)));
    rows.push_back(r);
  }
  if (rows.size() == 1) return rows[0];
  return c.check(c.b().concat(rows, 0));
}

OpImporter recurrent(Cell cell) {
  return [cell](Context& c) -> Outs {
    const int64_t gates = cell == Cell::rnn ? 1 : cell == Cell::gru ? 3 : 4;
    ir::Builder& B = c.b();
    Expr e{c};
    KILN_ONNX_TRY(const Node* x, c.x(0));
    KILN_ONNX_TRY(const Node* w, c.x(1));
    KILN_ONNX_TRY(const Node* r, c.x(2));
    if (!ir::is_float(x->dtype)) return c.unsupported(fmt::format("{} of {}", c.node().op_type, ir::dtype_name(x->dtype)));
    const int64_t layout = c.attr_i("layout", 0);
    if (layout != 0 && layout != 1) return c.fail("layout must be 0 or 1");
    if (x->shape.size() != 3) return c.fail("X must have 3 axes");
    if (layout == 1) { KILN_ONNX_TRY(x, c.check(B.permute(x, {1, 0, 2}))); }  // [seq, batch, input]
    const int64_t seq = x->shape[0], batch = x->shape[1];
    if (seq > kMaxUnrolled)
      return c.unsupported(
          fmt::format("{} runs {} steps, more than {} (kiln unrolls recurrences at import)",
                      c.node().op_type, seq, kMaxUnrolled));
    const std::string direction = c.attr_s("direction").value_or("forward");
    if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
      return c.fail(fmt::format("direction '{}'", direction));
    const int64_t dirs = direction == "bidirectional" ? 2 : 1;
    if (w->shape.size() != 3 || w->shape[0] != dirs || w->shape[2] != x->shape[2] || w->shape[1] % gates)
      return c.fail(fmt::format("W has shape {}; expected [{}, {} * hidden, {}]", ir::shape_str(w->shape), dirs,
                                gates, x->shape[2]));
    const int64_t h = w->shape[1] / gates;
    if (c.attr("hidden_size") && c.attr_i("hidden_size", h) != h) return c.fail("hidden_size differs from W's");
    if (r->shape != ir::Shape{dirs, gates * h, h}) return c.fail(fmt::format("R has shape {}", ir::shape_str(r->shape)));
    if (cell == Cell::lstm && c.attr_i("input_forget", 0) != 0) return c.unsupported("input_forget=1");
    const bool linear_before_reset = cell == Cell::gru && c.attr_i("linear_before_reset", 0) != 0;
    std::optional<double> clip;
    if (c.attr("clip")) clip = c.attr_f("clip", 0);
    // Activations: per direction f (rnn), f g (gru), f g h (lstm).
    const size_t per_dir = cell == Cell::rnn ? 1 : cell == Cell::gru ? 2 : 3;
    std::vector<std::string> names;
    if (const AttributeProto* a = c.attr("activations")) {
      names = a->strings;
      if (names.size() != per_dir * size_t(dirs))
        return c.fail(fmt::format("{} activations, expected {}", names.size(), per_dir * dirs));
    } else {
      for (int64_t d = 0; d < dirs; ++d) {
        if (cell == Cell::rnn) names.push_back("Tanh");
        else if (cell == Cell::gru) names.insert(names.end(), {"Sigmoid", "Tanh"});
        else names.insert(names.end(), {"Sigmoid", "Tanh", "Tanh"});
      }
    }
    std::vector<Activation> acts;
    size_t next_alpha = 0, next_beta = 0;
    for (const std::string& n : names) {
      KILN_ONNX_TRY(Activation a, activation(c, n, next_alpha, next_beta));
      acts.push_back(a);
    }
    // Optional inputs: B (3), sequence_lens (4), initial_h (5), initial_c (6), P (7).
    const Node* bias = nullptr;
    if (c.has(3)) {
      KILN_ONNX_TRY(bias, c.x(3));
      if (bias->shape != ir::Shape{dirs, 2 * gates * h}) return c.fail(fmt::format("B has shape {}", ir::shape_str(bias->shape)));
    }
    const Node* mask_lens = nullptr;  // sequence_lens as [batch, 1], when some may be shorter
    if (c.has(4)) {
      bool full = false;
      if (auto lens = c.ints(4, "sequence_lens"); lens)
        full = std::all_of(lens->begin(), lens->end(), [&](int64_t n) { return n == seq; });
      if (!full) {
        if (direction != "forward") return c.unsupported("sequence_lens shorter than the sequence in a reverse direction");
        KILN_ONNX_TRY(const Node* lens, c.x(4));
        KILN_ONNX_TRY(lens, c.check(B.cast(lens, ir::DType::i64)));
        KILN_ONNX_TRY(mask_lens, c.check(B.reshape(lens, {batch, 1})));
      }
    }
    auto state = [&](size_t input) -> Expected<const Node*> {  // [dirs, batch, h] or nullptr
      if (!c.has(input)) return nullptr;
      KILN_ONNX_TRY(const Node* s, c.x(input));
      if (layout == 1) { KILN_ONNX_TRY(s, c.check(B.permute(s, {1, 0, 2}))); }
      if (s->shape != ir::Shape{dirs, batch, h}) return c.fail(fmt::format("an initial state has shape {}", ir::shape_str(s->shape)));
      return s;
    };
    KILN_ONNX_TRY(const Node* h0_all, state(5));
    const Node* c0_all = nullptr;
    const Node* peep = nullptr;
    if (cell == Cell::lstm) {
      KILN_ONNX_TRY(c0_all, state(6));
      if (c.has(7)) {
        KILN_ONNX_TRY(peep, c.x(7));
        if (peep->shape != ir::Shape{dirs, 3 * h}) return c.fail(fmt::format("P has shape {}", ir::shape_str(peep->shape)));
      }
    }
    auto clipped = [&](const Node* v) -> Expected<const Node*> {
      if (!clip) return v;
      KILN_ONNX_TRY(v, e.bin(Op::Min, v, *clip));
      return e.bin(Op::Max, v, -*clip);
    };

    std::vector<const Node*> ys, hs, cs;  // per direction: [seq, batch, h], [batch, h], [batch, h]
    for (int64_t d = 0; d < dirs; ++d) {
      const bool reverse = direction == "reverse" || d == 1;
      const Activation* act = &acts[size_t(d) * per_dir];
      KILN_ONNX_TRY(const Node* wd, at(c, w, d));  // [gates*h, input]
      KILN_ONNX_TRY(wd, c.check(B.permute(wd, {1, 0})));
      KILN_ONNX_TRY(const Node* rd, at(c, r, d));  // [gates*h, h]
      KILN_ONNX_TRY(rd, c.check(B.permute(rd, {1, 0})));
      // Every step's input projection at once: [seq, batch, gates*h].
      KILN_ONNX_TRY(const Node* xp, c.check(B.matmul(x, wd)));
      const Node* rb = nullptr;
      if (bias) {
        KILN_ONNX_TRY(const Node* bd, at(c, bias, d));
        KILN_ONNX_TRY(const Node* wb, c.check(B.slice(bd, 0, 0, gates * h, 1)));
        KILN_ONNX_TRY(rb, c.check(B.slice(bd, 0, gates * h, 2 * gates * h, 1)));
        KILN_ONNX_TRY(xp, c.check(B.binary(Op::Add, xp, wb)));
      }
      const Node* hid = nullptr;
      const Node* cel = nullptr;
      if (h0_all) {
        KILN_ONNX_TRY(hid, at(c, h0_all, d));
      } else {
        KILN_ONNX_TRY(hid, c.check(B.full({batch, h}, 0, x->dtype)));
      }
      if (cell == Cell::lstm) {
        if (c0_all) {
          KILN_ONNX_TRY(cel, at(c, c0_all, d));
        } else {
          KILN_ONNX_TRY(cel, c.check(B.full({batch, h}, 0, x->dtype)));
        }
      }
      const Node *pi = nullptr, *po = nullptr, *pf = nullptr;
      if (peep) {
        KILN_ONNX_TRY(const Node* pd, at(c, peep, d));
        KILN_ONNX_TRY(pi, c.check(B.slice(pd, 0, 0, h, 1)));
        KILN_ONNX_TRY(po, c.check(B.slice(pd, 0, h, 2 * h, 1)));
        KILN_ONNX_TRY(pf, c.check(B.slice(pd, 0, 2 * h, 3 * h, 1)));
      }
      std::vector<const Node*> outs(size_t(seq), nullptr);
      for (int64_t step = 0; step < seq; ++step) {
        const int64_t t = reverse ? seq - 1 - step : step;
        KILN_ONNX_TRY(const Node* xt, at(c, xp, t));  // [batch, gates*h]
        KILN_ONNX_TRY(const Node* hr, c.check(B.matmul(hid, rd)));
        if (rb) { KILN_ONNX_TRY(hr, c.check(B.binary(Op::Add, hr, rb))); }
        auto pre = [&](int64_t k) -> Expected<const Node*> {  // gate k's x and h parts
          KILN_ONNX_TRY(const Node* a, gate(c, xt, k, h));
          KILN_ONNX_TRY(const Node* b, gate(c, hr, k, h));
          return c.check(B.binary(Op::Add, a, b));
        };
        const Node* next = nullptr;
        const Node* next_cell = nullptr;
        if (cell == Cell::rnn) {
          KILN_ONNX_TRY(const Node* v, pre(0));
          KILN_ONNX_TRY(v, clipped(v));
          KILN_ONNX_TRY(next, activate(c, act[0], v));
        } else if (cell == Cell::gru) {  // gates z, r, h
          KILN_ONNX_TRY(const Node* z, pre(0));
          KILN_ONNX_TRY(z, clipped(z));
          KILN_ONNX_TRY(z, activate(c, act[0], z));
          KILN_ONNX_TRY(const Node* rt, pre(1));
          KILN_ONNX_TRY(rt, clipped(rt));
          KILN_ONNX_TRY(rt, activate(c, act[0], rt));
          KILN_ONNX_TRY(const Node* xh, gate(c, xt, 2, h));
          const Node* hh = nullptr;
          if (linear_before_reset) {  // r * (H Rh^T + Rbh)
            KILN_ONNX_TRY(hh, gate(c, hr, 2, h));
            KILN_ONNX_TRY(hh, c.check(B.binary(Op::Mul, rt, hh)));
          } else {  // (r * H) Rh^T + Rbh
            KILN_ONNX_TRY(const Node* rh, c.check(B.binary(Op::Mul, rt, hid)));
            KILN_ONNX_TRY(const Node* rdh, c.check(B.slice(rd, 1, 2 * h, 3 * h, 1)));
            KILN_ONNX_TRY(hh, c.check(B.matmul(rh, rdh)));
            if (rb) {
              KILN_ONNX_TRY(const Node* rbh, c.check(B.slice(rb, 0, 2 * h, 3 * h, 1)));
              KILN_ONNX_TRY(hh, c.check(B.binary(Op::Add, hh, rbh)));
            }
          }
          KILN_ONNX_TRY(hh, c.check(B.binary(Op::Add, xh, hh)));
          KILN_ONNX_TRY(hh, clipped(hh));
          KILN_ONNX_TRY(hh, activate(c, act[1], hh));
          // (1 - z) * hh + z * H = hh + z * (H - hh)
          KILN_ONNX_TRY(const Node* diff, c.check(B.binary(Op::Sub, hid, hh)));
          KILN_ONNX_TRY(diff, c.check(B.binary(Op::Mul, z, diff)));
          KILN_ONNX_TRY(next, c.check(B.binary(Op::Add, hh, diff)));
        } else {  // gates i, o, f, c
          auto peephole = [&](const Node* v, const Node* p, const Node* state) -> Expected<const Node*> {
            if (!p) return v;
            KILN_ONNX_TRY(const Node* ps, c.check(B.binary(Op::Mul, p, state)));
            return c.check(B.binary(Op::Add, v, ps));
          };
          KILN_ONNX_TRY(const Node* i, pre(0));
          KILN_ONNX_TRY(i, peephole(i, pi, cel));
          KILN_ONNX_TRY(i, clipped(i));
          KILN_ONNX_TRY(i, activate(c, act[0], i));
          KILN_ONNX_TRY(const Node* f, pre(2));
          KILN_ONNX_TRY(f, peephole(f, pf, cel));
          KILN_ONNX_TRY(f, clipped(f));
          KILN_ONNX_TRY(f, activate(c, act[0], f));
          KILN_ONNX_TRY(const Node* g, pre(3));
          KILN_ONNX_TRY(g, clipped(g));
          KILN_ONNX_TRY(g, activate(c, act[1], g));
          KILN_ONNX_TRY(const Node* keep, c.check(B.binary(Op::Mul, f, cel)));
          KILN_ONNX_TRY(const Node* add, c.check(B.binary(Op::Mul, i, g)));
          KILN_ONNX_TRY(next_cell, c.check(B.binary(Op::Add, keep, add)));
          KILN_ONNX_TRY(const Node* o, pre(1));
          KILN_ONNX_TRY(o, peephole(o, po, next_cell));
          KILN_ONNX_TRY(o, clipped(o));
          KILN_ONNX_TRY(o, activate(c, act[0], o));
          KILN_ONNX_TRY(const Node* hc, activate(c, act[2], next_cell));
          KILN_ONNX_TRY(next, c.check(B.binary(Op::Mul, o, hc)));
        }
        const Node* out = next;
        if (mask_lens) {  // steps at or past a batch entry's length keep its state, output 0
          KILN_ONNX_TRY(const Node* tn, e.k(double(t), ir::DType::i64));
          KILN_ONNX_TRY(const Node* live, c.check(B.binary(Op::Lt, tn, mask_lens)));
          KILN_ONNX_TRY(next, c.check(B.where(live, next, hid)));
          if (next_cell) { KILN_ONNX_TRY(next_cell, c.check(B.where(live, next_cell, cel))); }
          KILN_ONNX_TRY(const Node* zero, e.k(0, x->dtype));
          KILN_ONNX_TRY(out, c.check(B.where(live, out, zero)));
        }
        hid = next;
        if (next_cell) cel = next_cell;
        outs[size_t(t)] = out;
      }
      KILN_ONNX_TRY(const Node* y, stack(c, outs));
      ys.push_back(y);
      hs.push_back(hid);
      if (cell == Cell::lstm) cs.push_back(cel);
    }
    // Y [seq, dirs, batch, h]; Y_h, Y_c [dirs, batch, h]; layout 1 puts batch first.
    std::vector<const Node*> per_dir_y;
    for (const Node* y : ys) {
      KILN_ONNX_TRY(const Node* y4, c.check(B.reshape(y, {seq, 1, batch, h})));
      per_dir_y.push_back(y4);
    }
    const Node* y = per_dir_y[0];
    if (per_dir_y.size() > 1) { KILN_ONNX_TRY(y, c.check(B.concat(per_dir_y, 1))); }
    KILN_ONNX_TRY(const Node* yh, stack(c, hs));
    const Node* yc = nullptr;
    if (cell == Cell::lstm) { KILN_ONNX_TRY(yc, stack(c, cs)); }
    if (layout == 1) {
      KILN_ONNX_TRY(y, c.check(B.permute(y, {2, 0, 1, 3})));
      KILN_ONNX_TRY(yh, c.check(B.permute(yh, {1, 0, 2})));
      if (yc) { KILN_ONNX_TRY(yc, c.check(B.permute(yc, {1, 0, 2}))); }
    }
    std::vector<Value> result{c.out(y), c.out(yh)};
    if (cell == Cell::lstm) result.push_back(c.out(yc));
    return result;
  };
}

}  // namespace

void add_recurrent_ops(OpTable& t) {
  t["RNN"] = recurrent(Cell::rnn);
  t["GRU"] = recurrent(Cell::gru);
  t["LSTM"] = recurrent(Cell::lstm);
}

}  // namespace kiln::onnx
