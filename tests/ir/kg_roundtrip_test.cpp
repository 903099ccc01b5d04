// `.kg` reader and printer: the corpus covers every op and composite, printing is canonical and
// read -> print -> read gives back the same nodes.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_map>

#include "ir/kg_ops.h"
#include "tests/ir/ir_test_support.h"

namespace kiln::ir {
namespace {

using testing::ok;
using testing::read_ok;

namespace fs = std::filesystem;

std::vector<fs::path> corpus_files() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(KILN_SOURCE_DIR) / "tests/ir/corpus"))
    if (e.path().extension() == ".kg") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Rebuilds the nodes of `k` with its inputs replaced by `base`'s inputs (same positions): in one
// Graph, interning must then give back exactly `base`'s nodes.
std::vector<const Node*> rebase_outputs(Graph& g, const KgGraph& k, const KgGraph& base) {
  std::unordered_map<const Node*, const Node*> map;
  for (size_t i = 0; i < k.inputs.size() && i < base.inputs.size(); ++i)
    map[k.inputs[i].second] = base.inputs[i].second;
  std::vector<const Node*> roots;
  for (const auto& [name, n] : k.outputs) roots.push_back(n);
  for (const Node* n : topo_order(roots)) {
    if (map.contains(n)) continue;
    std::vector<const Node*> ins;
    for (const Node* in : n->inputs) ins.push_back(map.at(in));
    map[n] = g.make(n->op, n->dtype, n->shape, ins, n->attrs);
  }
  std::vector<const Node*> out;
  for (const Node* r : roots) out.push_back(map.at(r));
  return out;
}

TEST(KgCorpus, CoversEveryOpAndComposite) {
  std::set<Op> seen;
  std::string all_text;
  for (const fs::path& p : corpus_files()) {
    Graph g;
    std::string text = slurp(p);
    all_text += text;
    KgGraph k = read_ok(g, text);
    std::vector<const Node*> roots;
    for (const auto& [name, n] : k.outputs) roots.push_back(n);
    for (const Node* n : topo_order(roots)) seen.insert(n->op);
  }
#define KILN_OP(Enum, ...) EXPECT_TRUE(seen.contains(Op::Enum)) << #Enum;
#include "kiln/ops.def"
  for (const char* composite : {"mean(", "softmax(", "log_softmax(", "layernorm(", "attention("})
    EXPECT_NE(all_text.find(std::string("= ") + composite), std::string::npos) << composite;
}

TEST(KgCorpus, ReadPrintReadPrintIsStable) {
  for (const fs::path& p : corpus_files()) {
    SCOPED_TRACE(p.filename().string());
    Graph g;
    KgGraph k1 = read_ok(g, slurp(p));
    std::string p1 = print_kg(k1);
    KgGraph k2 = read_ok(g, p1);
    std::string p2 = print_kg(k2);
    EXPECT_EQ(p1, p2);
    ASSERT_EQ(k1.outputs.size(), k2.outputs.size());
    std::vector<const Node*> rebased = rebase_outputs(g, k2, k1);
    for (size_t i = 0; i < k1.outputs.size(); ++i) {
      EXPECT_EQ(k1.outputs[i].first, k2.outputs[i].first);
      EXPECT_EQ(rebased[i], k1.outputs[i].second) << "output " << k1.outputs[i].first;
    }
    // A fresh Graph prints the same text: the printer does not depend on what else a Graph holds.
    Graph fresh;
    EXPECT_EQ(print_kg(read_ok(fresh, p1)), p1);
  }
}

TEST(KgReader, RepeatedStatementsInternToOneNode) {
  Graph g;
  KgGraph k = read_ok(g, R"(kiln.graph v1
input %x : f32[3]
%a = exp(%x)
%b = exp(%x)
%c = add(%a, 1)
%d = add(%b, 1.0)
output %c
output %d
)");
  ASSERT_EQ(k.outputs.size(), 2u);
  EXPECT_EQ(k.outputs[0].second, k.outputs[1].second);
  ASSERT_EQ(k.inputs.size(), 1u);
  EXPECT_EQ(k.inputs[0].first, "x");
  EXPECT_EQ(k.inputs[0].second->attrs.s(AttrKey::name), "x");
}

TEST(KgReader, LiteralSpellings) {
  Graph g;
  Builder b(g);
  KgGraph k = read_ok(g, R"(kiln.graph v1
input %x : f64[2]
%a = add(%x, -inf)
%b = add(%x, inf)
%c = add(%x, 1e-5)
%d = add(%x, -2.5E+3)
%e = add(%x, .5)
%f = add(%x, +3)
output %a
output %b
output %c
output %d
output %e
output %f
)");
  const double expect[] = {-INFINITY, INFINITY, 1e-5, -2500, 0.5, 3};
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(k.outputs[i].second->inputs[1], ok(b.scalar(expect[i], DType::f64))) << i;
  KgGraph n = read_ok(g, "kiln.graph v1\ninput %x : f32[2]\n%a = add(%x, nan)\noutput %a\n");
  EXPECT_TRUE(std::isnan(n.outputs[0].second->inputs[1]->attrs.f(AttrKey::value)));
  EXPECT_EQ(print_kg(n), "kiln.graph v1\ninput %x : f32[2]\n%a = add(%x, nan)\noutput %a\n");
}

TEST(KgPrinter, CanonicalText) {
  Graph g;
  KgGraph good = read_ok(g, R"(# a comment before the header
kiln.graph v1   # header comment
input %x : f32[8,16]
input %unused : i8[]

%mu = mean(%x, axes=[-1], keepdim=true)   # a composite
%d = sub(%x, %mu)
%s = slice(%d, axis=1, step=-2)
%m = gt(%s, 0)
%y = where(%m, %s, -inf)
output %y
output %x
)");
  EXPECT_EQ(print_kg(good), R"(kiln.graph v1
input %x : f32[8,16]
input %unused : i8[]
%t0 = sum(%x, axes=[1], keepdim=true)
%mu = mul(%t0, 0.0625)
%d = sub(%x, %mu)
%s = slice(%d, axis=1, start=15, end=-17, step=-2)
%m = gt(%s, 0)
%y = where(%m, %s, -inf)
output %y
output %x
)");  // the file's names are kept; values it did not name (inside mean) are %t0, %t1, ...
}

// cumsum's axis is normalized and its flags always printed, in the table's order.
TEST(KgPrinter, CumSumPrintsEveryAttribute) {
  Graph g;
  KgGraph k = read_ok(g, R"(kiln.graph v1
input %x : i32[4,5]
%y = cumsum(%x, reverse=true, axis=-1)
output %y
)");
  EXPECT_EQ(print_kg(k), R"(kiln.graph v1
input %x : i32[4,5]
%y = cumsum(%x, axis=1, exclusive=false, reverse=true)
output %y
)");
}

// topk_indices: k required, axis (default -1) normalized, largest (default true) always printed.
TEST(KgPrinter, TopKIndicesPrintsEveryAttribute) {
  Graph g;
  KgGraph k = read_ok(g, R"(kiln.graph v1
input %x : f32[4,5]
%i = topk_indices(%x, k=3)
%j = topk_indices(%x, largest=false, k=0, axis=0)
output %i
output %j
)");
  EXPECT_EQ(print_kg(k), R"(kiln.graph v1
input %x : f32[4,5]
%i = topk_indices(%x, k=3, axis=1, largest=true)
%j = topk_indices(%x, k=0, axis=0, largest=false)
output %i
output %j
)");
}

TEST(KgPrinter, ScatterElementsPrintsItsReductionAsAName) {
  Graph g;
  KgGraph k = read_ok(g, R"(kiln.graph v1
input %x : f32[4,5]
input %i : i32[2,5]
input %u : f32[2,5]
%y = scatter_elements(%x, %i, %u, axis=-2)
%z = scatter_elements(%y, %i, %u, reduction=max, axis=0)
output %z
)");
  EXPECT_EQ(print_kg(k), R"(kiln.graph v1
input %x : f32[4,5]
input %i : i32[2,5]
input %u : f32[2,5]
%y = scatter_elements(%x, %i, %u, axis=0, reduction=none)
%z = scatter_elements(%y, %i, %u, axis=0, reduction=max)
output %z
)");
}

TEST(KgPrinter, ScalarsPrintAsLiteralsOnlyWhenTheDtypeWouldSurvive) {
  Graph g;
  Builder b(g);
  const Node* x = g.input(DType::f32, {3}, "x");
  const Node* si = ok(b.scalar(2, DType::i32));
  const Node* c = ok(b.cast(si, DType::f32));  // a literal here would read back as f32
  const Node* y = ok(b.binary(Op::Add, x, c));
  const Node* p = ok(b.scalar(1, DType::boolean));
  const Node* w = ok(b.where(p, y, ok(b.scalar(0, DType::f32))));
  const Node* z = ok(b.binary(Op::Mul, ok(b.scalar(3, DType::i64)), ok(b.scalar(4, DType::i64))));
  KgGraph k{{{"x", x}}, {{"w", w}, {"z", z}, {"again", w}}, {}};
  std::string text = print_kg(k);
  EXPECT_EQ(text, R"(kiln.graph v1
input %x : f32[3]
%t0 = full(shape=[], value=2.0, dtype=i32)
%t1 = cast(%t0, to=f32)
%t2 = add(%x, %t1)
%w = where(1, %t2, 0)
%t3 = full(shape=[], value=3, dtype=i64)
%z = mul(%t3, 4)
%again = permute(%w, dims=[0])
output %w
output %z
output %again
)");
  // Every output keeps its name: one listed twice is an alias of the first (it was dropped).
  KgGraph back = read_ok(g, text);
  ASSERT_EQ(back.outputs.size(), 3u);
  EXPECT_EQ(back.outputs[2].first, "again");
  EXPECT_EQ(back.outputs[1].second, z);  // no inputs involved: the very same node
  EXPECT_EQ(back.outputs[0].second->inputs[0], p);
}

TEST(KgPrinter, ReachableInputsMissingFromTheListStillPrint) {
  Graph g;
  Builder b(g);
  const Node* a = g.input(DType::f32, {2}, "");
  const Node* t0 = g.input(DType::f32, {2}, "t0");
  KgGraph k{{}, {{"y", ok(b.binary(Op::Add, a, t0))}}, {}};
  std::string slot = std::to_string(a->attrs.i(AttrKey::slot));
  EXPECT_EQ(print_kg(k), "kiln.graph v1\ninput %in" + slot + " : f32[2]\ninput %t0 : f32[2]\n" +
                             "%y = add(%in" + slot + ", %t0)\noutput %y\n");
}

TEST(KgReader, MissingFile) {
  Graph g;
  auto r = read_kg_file(g, "/nonexistent/dir/g.kg");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "cannot open '/nonexistent/dir/g.kg': No such file or directory");
}

TEST(KgReader, ADirectoryOrAStreamThatNeverEndsIsAnErrorNamingIt) {
  Graph g;
  const std::string dir = fs::temp_directory_path().string();
  auto r = read_kg_file(g, dir);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "cannot read '" + dir + "': it is a directory");
  // /dev/zero never ends: read up to the limit, then refused (a small limit here).
  auto endless = read_text_file("/dev/zero", 1 << 20);
  ASSERT_FALSE(endless);
  EXPECT_EQ(endless.error().message,
            "cannot read '/dev/zero': it is not a regular file and goes on past 1048576 bytes");
  // A stream that ends is read whole.
  auto empty = read_text_file("/dev/null");
  ASSERT_TRUE(empty) << empty.error().message;
  EXPECT_EQ(*empty, "");
}

TEST(KgReader, ReadsAFileAndNamesItInErrors) {
  fs::path dir = fs::temp_directory_path() / ("kiln_ir_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path ok_file = dir / "ok.kg", bad_file = dir / "bad.kg";
  std::ofstream(ok_file) << "kiln.graph v1\ninput %x : f32[2]\noutput %x\n";
  std::ofstream(bad_file) << "kiln.graph v1\ninput %x : f32[2]\n%y = foo(%x)\noutput %y\n";
  Graph g;
  auto r = read_kg_file(g, ok_file.string());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->outputs[0].second, r->inputs[0].second);
  auto bad = read_kg_file(g, bad_file.string());
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, bad_file.string() + ":3:6: error: unknown op 'foo'");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::ir

namespace kiln::ir {
namespace {

// i64 values past 2^53 are no doubles: a `full`'s value and a literal operand keep every bit
// through the builder, the printer and the reader (the same nodes back).
TEST(KgPrinter, Int64LiteralsPast2To53RoundTripExactly) {
  const int64_t big = (int64_t{1} << 53) + 1;
  Graph g;
  Builder b(g);
  const Node* x = g.input(DType::i64, {2}, "x");
  const Node* f = ok(b.full_int({2}, big, DType::i64));
  const Node* y = ok(b.binary(Op::Add, x, ok(b.full_int({}, big + 2, DType::i64))));
  const Node* z = ok(b.binary(Op::Mul, y, f));
  KgGraph k{{{"x", x}}, {{"z", z}}, {}};
  const std::string text = print_kg(k);
  EXPECT_NE(text.find("value=9007199254740993, dtype=i64"), std::string::npos) << text;
  EXPECT_NE(text.find("add(%x, 9007199254740995)"), std::string::npos) << text;
  KgGraph back = read_ok(g, text);
  ASSERT_EQ(back.outputs.size(), 1u);
  EXPECT_EQ(print_kg(back), text);
  const Node* bf = back.outputs[0].second->inputs[1];  // read back as the same i64, not a double
  ASSERT_EQ(bf->op, Op::Full);
  EXPECT_EQ(std::get<int64_t>(*bf->attrs.find(AttrKey::value)), big);
  // A value that differs only past a double's 53 bits is another node.
  EXPECT_NE(ok(b.full_int({2}, big + 1, DType::i64)), f);
  // Out of a smaller dtype's range: the error names the value as written.
  auto bad = b.full_int({2}, big, DType::i32);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("9007199254740993"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace kiln::ir
