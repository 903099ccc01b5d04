// The IR verifiers: well-formed graphs and kernels pass; each planted fault is found and named.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "ir/verify.h"
#include "tests/support/kernel_builder.h"

namespace kiln {
namespace {

using ir::DType;
using ir::Op;

const ir::Node* must(Expected<const ir::Node*> n) {
  EXPECT_TRUE(n.has_value()) << n.error().message;
  return *n;
}

std::string graph_error(const std::vector<const ir::Node*>& outputs) {
  auto ok = ir::verify_graph(outputs);
  return ok ? "" : ok.error().message;
}

TEST(VerifyGraph, BuilderGraphsPass) {
  ir::Graph g;
  ir::Builder b(g);
  const ir::Node* x = g.input(DType::f32, {4, 8}, "x");
  const ir::Node* w = g.input(DType::f32, {8, 3}, "w");
  const ir::Node* h = must(b.matmul(x, w));
  const ir::Node* s = must(b.softmax(h, 1));
  const ir::Node* p = must(b.permute(s, {1, 0}));
  const ir::Node* m = must(b.arg_reduce(Op::ArgMax, p, 0, false));
  const ir::Node* c = must(b.binary(Op::Lt, s, must(b.scalar(0.5, DType::f32))));
  const ir::Node* pad = must(b.pad(must(b.cast(c, DType::f32)), {1, 0}, {0, 2}, -1.0));
  EXPECT_EQ(graph_error({m, pad, x}), "");
}

TEST(VerifyGraph, AWrongShapeIsNamed) {
  ir::Graph g;
  const ir::Node* x = g.input(DType::f32, {4}, "x");
  const ir::Node* y = g.make(Op::Add, DType::f32, {5}, {x, x}, {});
  EXPECT_EQ(
      graph_error({y}),
      fmt::format("%t{} = Add is f32[5], but its operands and attributes give f32[4]", y->id));
}

TEST(VerifyGraph, AWrongDtypeIsNamed) {
  ir::Graph g;
  const ir::Node* x = g.input(DType::f32, {4}, "x");
  const ir::Node* y = g.make(Op::Lt, DType::f32, {4}, {x, x}, {});
  EXPECT_NE(graph_error({y}).find("= Lt is f32[4], but its operands and attributes give bool[4]"),
            std::string::npos)
      << graph_error({y});
}

TEST(VerifyGraph, ArityAttributesAndSlotsAreChecked) {
  ir::Graph g;
  const ir::Node* x = g.input(DType::f32, {4, 2}, "x");
  const ir::Node* one = g.make(Op::Add, DType::f32, {4, 2}, {x}, {});
  EXPECT_NE(graph_error({one}).find("has 1 operands; the op takes 2"), std::string::npos)
      << graph_error({one});
  const ir::Node* no_axes = g.make(Op::Sum, DType::f32, {2}, {x}, {});
  // Without `axes` the builder reduces every axis.
  EXPECT_EQ(
      graph_error({no_axes}),
      fmt::format("%t{} = Sum is f32[2], but its operands and attributes give f32[]", no_axes->id));
  const ir::Node* bad_perm = g.make(Op::Permute, DType::f32, {2, 4}, {x},
                                    {{ir::AttrKey::dims, std::vector<int64_t>{0, 0}}});
  EXPECT_NE(graph_error({bad_perm}).find("= Permute: the builder rejects it"), std::string::npos)
      << graph_error({bad_perm});
  const ir::Node* slotless = g.make(Op::Input, DType::f32, {4}, {}, {});
  EXPECT_NE(graph_error({slotless}).find("has no slot"), std::string::npos);
  const ir::Node* full = g.make(Op::Full, DType::f32, {4}, {}, {});
  EXPECT_NE(graph_error({full}).find("has no value"), std::string::npos);
  EXPECT_EQ(graph_error({nullptr}), "an output of the graph is null");
}

// ---- kernels ----

struct Kernels {
  std::shared_ptr<kir::ExprArena> a = std::make_shared<kir::ExprArena>();
  // y[i] = x[i] + 1 over 8 points (f32), the base every fault below is planted into.
  kir::Kernel add_one() {
    const kir::Expr* i = a->var(0);
    const kir::Expr* v =
        a->alu(kir::Alu::Add, DType::f32, {a->load(0, DType::f32, i), a->constant(DType::f32, 1)});
    return testing::make_kernel("k", {{DType::f32, {8}, false, "x"}, {DType::f32, {8}, true, "y"}},
                                {8}, a, {{1, i, v}});
  }
  // y[i] = sum over j of x[i*4 + j] (f32) over 2 rows.
  kir::Kernel row_sum() {
    const kir::Expr* i = a->var(0);
    const kir::Expr* j = a->var(1);
    const kir::Expr* idx =
        a->alu(kir::Alu::Add, DType::i64, {a->alu(kir::Alu::Mul, DType::i64, {i, a->index(4)}), j});
    const kir::Expr* r =
        a->reduce(kir::ReduceOp::Sum, DType::f32, a->load(0, DType::f32, idx), {1}, {4});
    return testing::make_kernel("sum",
                                {{DType::f32, {2, 4}, false, "x"}, {DType::f32, {2}, true, "y"}},
                                {2}, a, {{1, i, r}});
  }
};

std::string kernel_error(const kir::Kernel& k) {
  auto ok = kir::verify_kernel(k);
  return ok ? "" : ok.error().message;
}

TEST(VerifyKernel, WellFormedKernelsPass) {
  Kernels ks;
  EXPECT_EQ(kernel_error(ks.add_one()), "");
  EXPECT_EQ(kernel_error(ks.row_sum()), "");
}

TEST(VerifyKernel, StoresAndParametersAreChecked) {
  Kernels ks;
  kir::Kernel into_input = ks.add_one();
  into_input.stores[0].buf = 0;
  EXPECT_NE(kernel_error(into_input).find("store 0 writes parameter 0, an input"),
            std::string::npos)
      << kernel_error(into_input);
  kir::Kernel out_of_range = ks.add_one();
  out_of_range.stores[0].buf = 2;
  EXPECT_NE(kernel_error(out_of_range).find("store 0 writes parameter 2 of 2"), std::string::npos);
  kir::Kernel wrong_dtype = ks.add_one();
  wrong_dtype.params[1].dtype = DType::f64;
  EXPECT_NE(kernel_error(wrong_dtype).find("store 0 writes f32 into parameter 1 of f64"),
            std::string::npos);
  kir::Kernel unstored = ks.add_one();
  unstored.params.push_back({DType::f32, {8}, true, "z"});
  EXPECT_EQ(kernel_error(unstored), "kernel k: output parameter 2 is never stored");
  kir::Kernel negative = ks.add_one();
  negative.domain[0] = -1;
  EXPECT_EQ(kernel_error(negative), "kernel k: domain axis 0 has extent -1");
}

TEST(VerifyKernel, ExpressionsAreChecked) {
  Kernels ks;
  auto& a = *ks.a;
  kir::Kernel load_dtype = ks.add_one();
  load_dtype.stores[0].value = a.alu(kir::Alu::Add, DType::f32,
                                     {a.load(0, DType::i32, a.var(0)), a.constant(DType::f32, 1)});
  EXPECT_NE(kernel_error(load_dtype).find("the parameter is f32"), std::string::npos)
      << kernel_error(load_dtype);
  kir::Kernel mixed = ks.add_one();
  mixed.stores[0].value = a.alu(kir::Alu::Add, DType::f32,
                                {a.load(0, DType::f32, a.var(0)), a.constant(DType::f64, 1)});
  EXPECT_NE(kernel_error(mixed).find("operand 1 is f64, not f32"), std::string::npos)
      << kernel_error(mixed);
  kir::Kernel compare = ks.add_one();
  compare.stores[0].value = a.alu(kir::Alu::Lt, DType::f32, {a.var(0), a.index(3)});
  EXPECT_NE(kernel_error(compare).find("a comparison gives bool"), std::string::npos)
      << kernel_error(compare);
  kir::Kernel unbound = ks.add_one();
  unbound.stores[0].index = a.var(3);
  EXPECT_NE(kernel_error(unbound).find("store 0 reads loop variable v3, which no loop binds there"),
            std::string::npos)
      << kernel_error(unbound);
  kir::Kernel index_dtype = ks.add_one();
  index_dtype.stores[0].index = a.constant(DType::i32, 0);
  EXPECT_NE(kernel_error(index_dtype).find("store 0 has a i32 index"), std::string::npos)
      << kernel_error(index_dtype);
}

TEST(VerifyKernel, ReductionsAreChecked) {
  Kernels ks;
  auto& a = *ks.a;
  kir::Kernel base = ks.row_sum();
  const kir::Expr* body = base.stores[0].value->args[0];
  kir::Kernel parallel_id = base;
  parallel_id.stores[0].value = a.reduce(kir::ReduceOp::Sum, DType::f32, body, {0}, {4});
  EXPECT_NE(kernel_error(parallel_id).find("its variable v0 is a parallel variable's id"),
            std::string::npos)
      << kernel_error(parallel_id);
  kir::Kernel arg_dtype = base;
  arg_dtype.params[1].dtype = DType::f32;
  arg_dtype.stores[0].value = a.reduce(kir::ReduceOp::ArgMax, DType::f32, body, {1}, {4});
  EXPECT_NE(kernel_error(arg_dtype).find("argmax/argmin give i32"), std::string::npos)
      << kernel_error(arg_dtype);
  // Two reductions binding one variable.
  kir::Kernel shared = base;
  const kir::Expr* other = a.reduce(kir::ReduceOp::Max, DType::f32, body, {1}, {4});
  shared.stores[0].value = a.alu(kir::Alu::Add, DType::f32, {base.stores[0].value, other});
  EXPECT_NE(kernel_error(shared).find("v1 is also bound by expression"), std::string::npos)
      << kernel_error(shared);
  kir::Kernel negative = base;
  negative.stores[0].value = a.reduce(kir::ReduceOp::Sum, DType::f32, body, {1}, {-2});
  EXPECT_NE(kernel_error(negative).find("v1 has extent -2"), std::string::npos)
      << kernel_error(negative);
}

// y[i, j] = running sum of x[i, 0..j] over a [2, 4] domain: the scan is the innermost variable.
TEST(VerifyKernel, ScansAreChecked) {
  Kernels ks;
  auto& a = *ks.a;
  const kir::Expr* i = a.var(0);
  const kir::Expr* j = a.var(1);
  const kir::Expr* idx =
      a.alu(kir::Alu::Add, DType::i64, {a.alu(kir::Alu::Mul, DType::i64, {i, a.index(4)}), j});
  const kir::Expr* x = a.load(0, DType::f32, idx);
  kir::Kernel scan = testing::make_kernel(
      "scan", {{DType::f32, {2, 4}, false, "x"}, {DType::f32, {2, 4}, true, "y"}}, {2, 4}, ks.a,
      {{1, idx, a.scan(kir::ReduceOp::Sum, DType::f32, x, 1)}});
  EXPECT_EQ(kernel_error(scan), "");
  kir::Kernel outer = scan;
  outer.stores[0].value = a.scan(kir::ReduceOp::Sum, DType::f32, x, 0);
  EXPECT_EQ(
      kernel_error(outer),
      fmt::format("kernel scan: expression #{} (scan sum f32): it scans v0, not the innermost "
                  "axis of a domain of rank >= 2 (domain [2,4])",
                  outer.stores[0].value->id));
  kir::Kernel nested = scan;
  const kir::Expr* inner = a.scan(kir::ReduceOp::Sum, DType::f32, x, 1);
  nested.stores[0].value = a.scan(kir::ReduceOp::Sum, DType::f32, inner, 1);
  EXPECT_NE(kernel_error(nested).find(
                fmt::format("its body holds expression #{} (scan sum f32)", inner->id)),
            std::string::npos)
      << kernel_error(nested);
  kir::Kernel with_reduce = scan;
  const kir::Expr* r =
      a.reduce(kir::ReduceOp::Sum, DType::f32, a.load(0, DType::f32, a.var(2)), {2}, {8});
  with_reduce.stores[0].value = a.alu(kir::Alu::Add, DType::f32, {scan.stores[0].value, r});
  EXPECT_NE(kernel_error(with_reduce).find("a kernel with a scan holds no reduction"),
            std::string::npos)
      << kernel_error(with_reduce);
  kir::Kernel bool_scan = scan;
  bool_scan.params[1].dtype = DType::boolean;
  bool_scan.stores[0].value =
      a.scan(kir::ReduceOp::Sum, DType::boolean,
             a.alu(kir::Alu::Gt, DType::boolean, {x, a.constant(DType::f32, 0)}), 1);
  EXPECT_NE(kernel_error(bool_scan).find("its body is bool"), std::string::npos)
      << kernel_error(bool_scan);
  EXPECT_NE(kir::print_kernel(scan).find("scan.sum f32 (v1) $"), std::string::npos)
      << kir::print_kernel(scan);
}

// y[i, j] = the j-th largest x[i, r] over r < 4, on a [2, 3] domain: a selection scan along the
// innermost variable with one variable of its own.
TEST(VerifyKernel, SelectionScansAreChecked) {
  Kernels ks;
  auto& a = *ks.a;
  const kir::Expr* i = a.var(0);
  const kir::Expr* x = a.load(0, DType::f32,
                              a.alu(kir::Alu::Add, DType::i64,
                                    {a.alu(kir::Alu::Mul, DType::i64, {i, a.index(4)}), a.var(2)}));
  const kir::Expr* out = a.alu(kir::Alu::Add, DType::i64,
                               {a.alu(kir::Alu::Mul, DType::i64, {i, a.index(3)}), a.var(1)});
  kir::Kernel topk = testing::make_kernel(
      "topk", {{DType::f32, {2, 4}, false, "x"}, {DType::i64, {2, 3}, true, "y"}}, {2, 3}, ks.a,
      {{1, out, a.select_scan(kir::ReduceOp::ArgMax, x, 1, 2, 4)}});
  EXPECT_EQ(kernel_error(topk), "");
  EXPECT_NE(kir::print_kernel(topk).find("scan.argmax i64 (v1; v2<4) $"), std::string::npos)
      << kir::print_kernel(topk);
  kir::Kernel outer = topk;
  outer.stores[0].value = a.select_scan(kir::ReduceOp::ArgMin, x, 0, 2, 4);
  EXPECT_NE(kernel_error(outer).find("it scans v0, not the innermost axis"), std::string::npos)
      << kernel_error(outer);
  kir::Kernel parallel = topk;  // its own variable must not be a parallel one
  parallel.domain = {2, 3, 4};
  EXPECT_NE(kernel_error(parallel).find("one variable of its own, not a parallel one"),
            std::string::npos)
      << kernel_error(parallel);
  kir::Kernel shared = topk;  // a reduction binding the selection's variable too
  const kir::Expr* r = a.reduce(kir::ReduceOp::Sum, DType::f32, x, {2}, {4});
  shared.params.push_back({DType::f32, {2, 3}, true, "z"});
  shared.stores.push_back({2, out, r});
  EXPECT_FALSE(kernel_error(shared).empty());
  kir::Kernel bool_body = topk;
  bool_body.stores[0].value =
      a.select_scan(kir::ReduceOp::ArgMax,
                    a.alu(kir::Alu::Gt, DType::boolean, {x, a.constant(DType::f32, 0)}), 1, 2, 4);
  EXPECT_NE(kernel_error(bool_body).find("it is i64 and its body is bool"), std::string::npos)
      << kernel_error(bool_body);
}

}  // namespace
}  // namespace kiln
