// `kiln dump` as a user runs it: every stage and format of the real binary, and its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <set>

#include "passes/cost_model.h"
#include "tests/dump/run_kiln.h"

namespace kiln::dump_test {
namespace {

namespace fs = std::filesystem;

// Under the first fuser the reduction is its own kernel, so there is exactly one boundary.
const char* kTwoKernels =
    "kiln.graph v1\n"
    "input %x : f32[64,32]\n"
    "%s = sum(%x, axes=[1], keepdim=true)\n"
    "%y = sub(%x, %s)\n"
    "%z = mul(%y, 2)\n"
    "output %z\n";

class KilnDump : public ScratchDir {
 protected:
  Result dump(const std::string& args) { return run_kiln("dump " + write("g.kg", kTwoKernels) + " " + args); }
};

TEST_F(KilnDump, GroupsListEachKernelsOpsAndEstimates) {
  Result r = dump("--stage groups --fuser first");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("kernel k0\n  %s = sum(%x, axes=[1], keepdim=true) : f32[64,1]\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("kernel k1\n  %y = sub(%x, %s) : f32[64,32]\n  %z = mul(%y, 2) : f32[64,32]\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  reads:  %x %s\n  writes: %z\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("why"), std::string::npos) << "reasons only with --why:\n" << r.out;
}

// Each estimate follows GroupCost's formula with the reference rates, and the total adds them up.
TEST_F(KilnDump, EstimatesFollowTheCostFormulaAndAddUp) {
  Result r = dump("--stage groups --fuser first --rates reference");
  ASSERT_EQ(r.code, 0) << r.err;
  passes::DeviceRates rates = passes::DeviceRates::reference_cpu();
  std::regex line(R"(estimate: (\d+) bytes, (\d+) launch(es)?, (\d+) flops, ([0-9.]+) µs)");
  double sum = 0;
  int kernels = 0;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end; it != end; ++it, ++kernels) {
    double bytes = std::stod((*it)[1]), launches = std::stod((*it)[2]), flops = std::stod((*it)[4]);
    double micros = std::stod((*it)[5]);
    EXPECT_GT(bytes, 0);
    double expect = 1e6 * (bytes / rates.bandwidth + launches * rates.launch_overhead + flops / rates.compute_rate);
    EXPECT_NEAR(micros, expect, 0.0015) << it->str();
    sum += micros;
  }
  EXPECT_EQ(kernels, 2) << r.out;
  std::smatch total;
  ASSERT_TRUE(std::regex_search(r.out, total, std::regex(R"(total: 2 kernels, estimated ([0-9.]+) µs)"))) << r.out;
  EXPECT_NEAR(std::stod(total[1]), sum, 0.003);
}

TEST_F(KilnDump, WhyListsEveryKernelBoundary) {
  Result r = dump("--stage groups --why --fuser first");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\nwhy (1 kernel boundary):\n%s -> %y: "), std::string::npos) << r.out;
  Result beam = dump("--stage groups --why");
  ASSERT_EQ(beam.code, 0) << beam.err;
  EXPECT_NE(beam.out.find("# fuser: beam"), std::string::npos) << beam.out;
}

// With the same rates. Measured ones are measured again by each process unless a cache keeps them
// (this suite's kiln.toml has none, and `kiln dump` never writes one), and they vary by a few %.
TEST_F(KilnDump, GroupsAreDeterministic) {
  Result a = dump("--stage groups --why --rates reference");
  Result b = dump("--stage groups --why --rates reference");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST_F(KilnDump, KernelsSourceAndGraphStages) {
  Result k = dump("--stage kernels --fuser first");
  ASSERT_EQ(k.code, 0) << k.err;
  EXPECT_EQ(k.out.rfind("# 2 kernels\n", 0), 0u) << k.out;
  EXPECT_NE(k.out.find("kernel k1\n"), std::string::npos) << k.out;
  Result s = dump("--stage source --fuser first");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(count(s.out, "\ndefine "), 2u) << s.out;
  Result llvm = dump("--stage llvm --fuser first");
  ASSERT_EQ(llvm.code, 0) << llvm.err;
  EXPECT_EQ(llvm.out, s.out) << "llvm is an alias of source";
  // The optimized graph is a `.kg` file that reads back to itself.
  Result g = dump("--stage graph");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_NE(g.out.find("input %x : f32[64,32]\n"), std::string::npos) << g.out;
  Result again = run_kiln("dump " + write("opt.kg", g.out) + " --stage graph");
  EXPECT_EQ(again.out, g.out);
}

// Outputs that optimize to an input (an identity reshape, a mean over no axes) keep their names,
// and the input its own: the optimized graph runs with the same --input and --out names (the
// input was printed %y and `output %x` stood for %d).
TEST_F(KilnDump, GraphStageKeepsInputAndOutputNames) {
  const std::string path = write("id.kg",
                                 "kiln.graph v1\ninput %x : f32[3]\n%y = reshape(%x, shape=[3])\n"
                                 "%z = exp(%x)\n%d = mean(%x, axes=[])\noutput %y\noutput %z\n"
                                 "output %d\n");
  Result g = run_kiln("dump " + path + " --stage graph");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(g.out,
            "kiln.graph v1\ninput %x : f32[3]\n%z = exp(%x)\n%y = permute(%x, dims=[0])\n"
            "%d = permute(%x, dims=[0])\noutput %y\noutput %z\noutput %d\n");
  Result again = run_kiln("dump " + write("opt.kg", g.out) + " --stage graph");
  EXPECT_EQ(again.out, g.out);
}

// Tuning logs its decisions on stderr: what `kiln dump` prints on stdout (LLVM IR here) stays
// what a user redirects into a file.
TEST_F(KilnDump, TuningLogsOnStderrAndSourceStaysClean) {
  Result s = dump("--stage source --fuser first --autotune");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(s.out.rfind("; 2 kernels for cpu\n", 0), 0u) << s.out;
  EXPECT_EQ(s.out.find("kiln["), std::string::npos) << s.out;
  EXPECT_NE(s.err.find("kiln[autotune] k0: "), std::string::npos) << s.err;
}

TEST_F(KilnDump, DotHasOneClusterPerKernelAndParses) {
  Result r = dump("--format dot --why --fuser first");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("digraph kiln {\n", 0), 0u) << r.out;
  EXPECT_EQ(count(r.out, "subgraph cluster_k"), 2u) << r.out;
  EXPECT_NE(r.out.find("label=\"k0: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("label=\"%s\\nsum f32[64,1]\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("k0_n"), std::string::npos) << r.out;
  std::regex crossing(R"(k0_n\d+ -> k1_n\d+ \[color="#cc0000", label="[^"]+")");
  EXPECT_TRUE(std::regex_search(r.out, crossing)) << "the crossing edge carries its reason:\n" << r.out;
  if (std::system("command -v dot >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "Graphviz `dot` is not installed (scripts/install-deps.sh installs it): "
                    "the DOT text was checked, its parsing was not";
  std::string dot = write("g.dot", r.out);
  std::string svg = (dir_ / "g.svg").string();
  ASSERT_EQ(std::system(("dot -Tsvg " + dot + " -o " + svg + " 2>" + (dir_ / "dot.err").string()).c_str()), 0)
      << read_text(dir_ / "dot.err");
  EXPECT_NE(read_text(svg).find("<svg"), std::string::npos);
}

TEST_F(KilnDump, HtmlIsOneSelfContainedPageWithEveryKernel) {
  std::string page = (dir_ / "g.html").string();
  Result r = dump("--format html --fuser first -o " + page);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "") << "-o writes the file, not stdout";
  std::string html = read_text(page);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(count(html, "<svg"), 1u);
  EXPECT_EQ(count(html, "<section class=\"kernel\""), 2u);
  for (const char* external : {"<link", "src=", "href=", "@import", "url("})
    EXPECT_EQ(html.find(external), std::string::npos) << "the page must not load " << external;
  // Each kernel's IR is there, escaped: the kernels stage text, with < > & turned into entities.
  Result k = dump("--stage kernels --fuser first");
  for (const std::string name : {"k0", "k1"}) {
    size_t at = k.out.find("kernel " + name + "\n");
    ASSERT_NE(at, std::string::npos) << k.out;
    std::string ir = k.out.substr(at, k.out.find("\n# ", at) - at);
    std::string escaped = std::regex_replace(std::regex_replace(ir, std::regex("<"), "&lt;"), std::regex(">"), "&gt;");
    EXPECT_NE(html.find(escaped), std::string::npos) << name << " IR missing:\n" << escaped;
  }
  EXPECT_NE(html.find("define "), std::string::npos) << "the source (LLVM IR) is shown";
}

// Each boundary's line shows the two estimates behind it: here the consumer's kernel reading the
// row sums against recomputing them (kernels of two shapes cannot merge).
TEST_F(KilnDump, WhyLinesShowTheTwoEstimates) {
  Result r = dump("--stage groups --fuser first --why --rates reference");
  ASSERT_EQ(r.code, 0) << r.err;
  std::smatch k1, why;
  ASSERT_TRUE(std::regex_search(
      r.out, k1, std::regex(R"(kernel k1\n(?:.*\n)*?  estimate: .* flops, ([0-9.]+ µs))")))
      << r.out;
  ASSERT_TRUE(std::regex_search(
      r.out, why,
      std::regex(
          R"(%s -> %y: (.+) \(k1 reading %s: ([0-9.]+ µs); recomputing it there: ([0-9.]+) µs\)\n)")))
      << r.out;
  EXPECT_EQ(why[2].str(), k1[1].str()) << "the reading side is k1's own estimate";
  EXPECT_GT(std::stod(why[3].str()), 0);
}

// Kernels of one shape: the two kernels apart (their sum) against one kernel doing both.
TEST_F(KilnDump, WhyLinesOfOneShapeCompareApartWithOneKernel) {
  std::string g = write(
      "two.kg",
      "kiln.graph v1\ninput %x : f32[256]\n%a = exp(%x)\n%b = log(%a)\noutput %a\noutput %b\n");
  Result r = run_kiln("dump " + g + " --stage groups --fuser first --why --rates reference");
  ASSERT_EQ(r.code, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.out, m,
      std::regex(
          R"(%a -> %b: .+ \(apart: k0 ([0-9.]+) µs \+ k1 ([0-9.]+) µs = ([0-9.]+) µs; as one kernel: ([0-9.]+) µs\))")))
      << r.out;
  EXPECT_NEAR(std::stod(m[1].str()) + std::stod(m[2].str()), std::stod(m[3].str()), 0.0015);
  // One kernel reads x once and writes both: less than the two kernels' bytes and launches.
  EXPECT_LT(std::stod(m[4].str()), std::stod(m[3].str())) << r.out;
}

TEST_F(KilnDump, HtmlShowsReasonsBesideTheBoundariesAndTheTargetsSource) {
  for (const std::string target : {"cpu", "vulkan", "cuda"}) {
    std::string page = (dir_ / ("g-" + target + ".html")).string();
    Result r = dump("--format html --fuser first --target " + target + " -o " + page);
    ASSERT_EQ(r.code, 0) << target << ": " << r.err;
    std::string html = read_text(page);
    // The boundary's reason is drawn next to its edge, with the estimates on hover.
    EXPECT_EQ(count(html, "<text class=\"why-label\""), 1u) << target;
    EXPECT_NE(html.find("k1 reading %s: "), std::string::npos) << target;
    // The list of boundaries comes before the kernels; each kernel says why it reads what it reads.
    EXPECT_LT(html.find("<h3>Why not fused</h3>"), html.find("<section class=\"kernel\""))
        << target;
    EXPECT_EQ(count(html, "<h3>Why it reads from other kernels</h3>"), 2u) << target;
    const char* language = target == "cpu" ? "LLVM IR" : target == "cuda" ? "CUDA C" : "GLSL";
    const char* marker = target == "cpu" ? "define " : target == "cuda" ? "__global__" : "#version";
    EXPECT_EQ(count(html, std::string("<h3>Source (") + language + ")</h3>"), 2u) << target;
    EXPECT_NE(html.find(marker), std::string::npos) << target;
    if (target != "cpu") {
      EXPECT_EQ(html.find("define "), std::string::npos) << target << " shows LLVM IR";
    }
  }
}

TEST_F(KilnDump, BadValuesAreOneClearError) {
  for (const std::string bad : {"--stage bogus", "--format svg", "--fuser smart", "--rates fast"}) {
    Result r = dump(bad);
    EXPECT_EQ(r.code, 1) << bad;
    std::string option = bad.substr(0, bad.find(' '));
    EXPECT_EQ(r.err.rfind("kiln: error: " + option + ": ", 0), 0u) << r.err;
    EXPECT_EQ(count(r.err, "\n"), 1u) << r.err;
    EXPECT_EQ(r.out, "");
  }
  Result greedy = dump("--fuser greedy --max-blocks 3");
  EXPECT_EQ(greedy.code, 1);
  EXPECT_EQ(greedy.err, "kiln: error: --max-blocks and --beam-width apply to --fuser beam, not --fuser greedy\n");
  Result dot = dump("--format dot --stage kernels");
  EXPECT_EQ(dot.code, 1);
  EXPECT_EQ(dot.err, "kiln: error: --format dot draws the groups stage; use --stage groups or --format text\n");
  Result unwritable = dump("--stage groups -o " + (dir_ / "missing" / "g.txt").string());
  EXPECT_EQ(unwritable.code, 1);
  EXPECT_NE(unwritable.err.find("cannot write"), std::string::npos) << unwritable.err;
}

}  // namespace
}  // namespace kiln::dump_test

namespace kiln::dump_test {
namespace {

// The value names (%name, not kernel parameters %0 %1 ... nor LLVM's) in a dump's text.
std::set<std::string> value_names(const std::string& text) {
  std::set<std::string> names;
  static const std::regex kName(R"(%[A-Za-z_][A-Za-z0-9_.]*)");
  const std::sregex_iterator end;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kName); it != end; ++it)
    names.insert(it->str());
  return names;
}

// One name per value through every stage and format: examples/mlp.kg's own names, nothing else.
TEST(KilnDumpNames, EveryStageAndFormatUsesTheGraphFilesNames) {
  const std::string graph = std::string(KILN_SOURCE_DIR) + "/examples/mlp.kg";
  const std::set<std::string> file = {"%x",  "%W1", "%b1", "%W2", "%b2",
                                      "%h0", "%h1", "%h",  "%y0", "%y"};
  for (const std::string args : {"--stage graph", "--stage groups --why", "--stage kernels",
                                 "--format dot --why", "--target vulkan --stage source",
                                 "--target cuda --stage source"}) {
    Result r = run_kiln("dump " + graph + " " + args);
    ASSERT_EQ(r.code, 0) << args << ": " << r.err;
    std::set<std::string> names = value_names(r.out);
    EXPECT_EQ(names, file) << args << ":\n" << r.out;
  }
  // The kernels stage labels each parameter with its value's name.
  Result k = run_kiln("dump " + graph + " --stage kernels");
  EXPECT_NE(k.out.find("param %3 out f32[256,1024]  # %h\n"), std::string::npos) << k.out;
  EXPECT_NE(k.out.find("param %0 in f32[256,1024]  # %x\n"), std::string::npos) << k.out;
}

}  // namespace
}  // namespace kiln::dump_test
