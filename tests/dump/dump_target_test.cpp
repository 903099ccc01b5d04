// GPU targets through the real `kiln` binary: `kiln dump --target cuda|vulkan` of every example
// graph gives PTX that ptxas accepts (sm_80, sm_90; no GPU needed) and SPIR-V that spirv-val
// accepts; `kiln run --device vulkan:0` gives the cpu's outputs; `kiln devices` lists them.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/dump/run_kiln.h"
#include "tools/npy.h"

namespace kiln::dump_test {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> example_graphs() {
  std::vector<fs::path> graphs;
  for (const auto& e : fs::directory_iterator(fs::path(KILN_SOURCE_DIR) / "examples"))
    if (e.path().extension() == ".kg") graphs.push_back(e.path());
  std::sort(graphs.begin(), graphs.end());
  return graphs;
}

std::vector<fs::path> files_with(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ext) out.push_back(e.path());
  return out;
}

class DumpTarget : public ScratchDir {};

TEST_F(DumpTarget, EveryExampleKernelCompilesToPtxThatPtxasAccepts) {
  const fs::path ptxas = "/usr/local/cuda/bin/ptxas";
  if (!fs::exists(ptxas)) GTEST_SKIP() << "no CUDA toolkit at /usr/local/cuda (ptxas)";
  for (const fs::path& graph : example_graphs())
    for (std::string arch : {"sm_80", "sm_90"}) {
      fs::path out = dir_ / (graph.stem().string() + "_" + arch);
      Result r = run_kiln("dump " + graph.string() + " --target cuda --arch " + arch +
                          " --out-dir " + out.string());
      ASSERT_EQ(r.code, 0) << graph << " " << arch << ": " << r.err;
      auto ptx = files_with(out, ".ptx");
      ASSERT_FALSE(ptx.empty()) << graph;
      EXPECT_EQ(files_with(out, ".cu").size(), ptx.size());
      EXPECT_EQ(files_with(out, ".cubin").size(), ptx.size());
      for (const fs::path& p : ptx) {
        EXPECT_NE(read_text(p).find(".target " + arch), std::string::npos) << p;
        auto check = kiln::testing::run_shell(ptxas.string() + " -arch=" + arch + " " + p.string() +
                                              " -o " + (out / "check.cubin").string() + " 2>&1");
        EXPECT_EQ(check.code, 0) << p << ": " << check.out;
      }
    }
}

// With compilation.matmul_precision = "high" the matmul and attention examples go to the tensor
// cores: the source stage heads each kernel with its strategy and launch shape, the matmuls read
// their plain operands by cp.async and ldmatrix, and ptxas accepts the PTX for sm_80 and sm_90.
TEST_F(DumpTarget, TensorCoreKernelsNameTheirStrategyAndPassPtxas) {
  const fs::path ptxas = "/usr/local/cuda/bin/ptxas";
  if (!fs::exists(ptxas)) GTEST_SKIP() << "no CUDA toolkit at /usr/local/cuda (ptxas)";
  const fs::path examples = fs::path(KILN_SOURCE_DIR) / "examples";
  struct Want {
    const char* graph;
    const char* summary;
    const char* text;
  };
  const Want wants[] = {
      {"matmul.kg", "// strategy matmul-mma, 64 workgroups of 256 threads\n", "cp.async.cg.shared.global"},
      {"matmul_bias_relu.kg", "// strategy matmul-mma, 64 workgroups of 256 threads\n", "ldmatrix.sync.aligned"},
      {"attention.kg", "// strategy attention-mma, 256 workgroups of 128 threads\n",
       "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"}};
  for (const Want& w : wants)
    for (std::string arch : {"sm_80", "sm_90"}) {
      SCOPED_TRACE(std::string(w.graph) + " " + arch);
      const std::string graph = (examples / w.graph).string();
      Result src = run_kiln("dump " + graph + " --target cuda --arch " + arch + " --stage source",
                            "KILN_COMPILATION_MATMUL_PRECISION=high");
      ASSERT_EQ(src.code, 0) << src.err;
      EXPECT_NE(src.out.find(w.summary), std::string::npos) << src.out.substr(0, 400);
      EXPECT_NE(src.out.find(w.text), std::string::npos);
      fs::path out = dir_ / (fs::path(w.graph).stem().string() + "_" + arch);
      Result r = run_kiln("dump " + graph + " --target cuda --arch " + arch + " --out-dir " +
                              out.string(),
                          "KILN_COMPILATION_MATMUL_PRECISION=high");
      ASSERT_EQ(r.code, 0) << r.err;
      for (const fs::path& p : files_with(out, ".ptx")) {
        auto check = kiln::testing::run_shell(ptxas.string() + " -arch=" + arch + " " + p.string() +
                                              " -o " + (out / "check.cubin").string() + " 2>&1");
        EXPECT_EQ(check.code, 0) << p << ": " << check.out;
      }
    }
  // The default precision keeps the SIMT strategies.
  Result simt = run_kiln("dump " + (examples / "matmul.kg").string() + " --target cuda --stage source");
  ASSERT_EQ(simt.code, 0) << simt.err;
  EXPECT_NE(simt.out.find("// strategy matmul-tiled, "), std::string::npos) << simt.out.substr(0, 400);
  EXPECT_EQ(simt.out.find("mma.sync"), std::string::npos);
}

TEST_F(DumpTarget, EveryExampleKernelIsValidSpirv) {
  if (kiln::testing::run_shell("command -v spirv-val").code != 0)
    GTEST_SKIP() << "spirv-val not installed (Debian package spirv-tools)";
  for (const fs::path& graph : example_graphs()) {
    fs::path out = dir_ / graph.stem();
    Result r = run_kiln("dump " + graph.string() + " --target vulkan --out-dir " + out.string());
    ASSERT_EQ(r.code, 0) << graph << ": " << r.err;
    auto spv = files_with(out, ".spv");
    ASSERT_FALSE(spv.empty()) << graph;
    EXPECT_EQ(files_with(out, ".comp").size(), spv.size());
    for (const fs::path& p : spv) {
      auto check = kiln::testing::run_shell("spirv-val --target-env vulkan1.2 " + p.string() + " 2>&1");
      EXPECT_EQ(check.code, 0) << p << ": " << check.out;
    }
  }
}

TEST_F(DumpTarget, StagesBelongToTheirTargets) {
  fs::path g = fs::path(KILN_SOURCE_DIR) / "examples" / "softmax.kg";
  Result ptx = run_kiln("dump " + g.string() + " --stage ptx");
  EXPECT_EQ(ptx.code, 1);
  EXPECT_EQ(ptx.err, "kiln: error: --stage ptx needs --target cuda (not cpu)\n");
  Result arch = run_kiln("dump " + g.string() + " --target vulkan --arch sm_90 --stage source");
  EXPECT_EQ(arch.code, 1);
  EXPECT_EQ(arch.err, "kiln: error: --arch applies to --target cuda, not vulkan\n");
  Result bad = run_kiln("dump " + g.string() + " --target cuda --arch 90 --stage ptx");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("sm_"), std::string::npos) << bad.err;
  Result cu = run_kiln("dump " + g.string() + " --target cuda --stage source");
  ASSERT_EQ(cu.code, 0) << cu.err;
  EXPECT_NE(cu.out.find("extern \"C\" __global__"), std::string::npos);
  Result glsl = run_kiln("dump " + g.string() + " --target vulkan --stage source");
  ASSERT_EQ(glsl.code, 0) << glsl.err;
  EXPECT_NE(glsl.out.find("#version 450"), std::string::npos);
  Result spirv = run_kiln("dump " + g.string() + " --target vulkan --stage spirv");
  ASSERT_EQ(spirv.code, 0) << spirv.err;
  EXPECT_NE(spirv.out.find("OpEntryPoint GLCompute"), std::string::npos);
}

TEST_F(DumpTarget, DevicesListsCpuReferenceVulkanAndCuda) {
  Result r = run_kiln("devices");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("cpu  present"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("reference  present"), std::string::npos);
  EXPECT_NE(r.out.find("vulkan:0  present"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cuda"), std::string::npos);  // present, or absent with the reason
}

// Every example on vulkan:0 gives the cpu's outputs (same inputs from the same seed).
TEST_F(DumpTarget, VulkanRunsGiveTheCpuOutputs) {
  for (const char* name : {"ew_chain", "softmax", "layernorm", "reduce_sum", "argmax_axis0",
                           "small_ops", "life", "mean_var", "gemv", "mlp", "attention"}) {
    fs::path g = fs::path(KILN_SOURCE_DIR) / "examples" / (std::string(name) + ".kg");
    fs::path cpu = dir_ / name / "cpu", vk = dir_ / name / "vulkan";
    Result a = run_kiln("run " + g.string() + " --random-inputs --out " + cpu.string());
    ASSERT_EQ(a.code, 0) << name << ": " << a.err;
    Result b = run_kiln("run " + g.string() + " --random-inputs --device vulkan:0 --out " + vk.string());
    ASSERT_EQ(b.code, 0) << name << ": " << b.err;
    for (const fs::path& f : files_with(cpu, ".npy")) {
      auto x = tools::read_npy(f.string());
      auto y = tools::read_npy((vk / f.filename()).string());
      ASSERT_TRUE(x && y) << f;
      ASSERT_EQ(x->shape, y->shape) << f;
      double scale = 1, worst = 0;
      for (int64_t i = 0; i < x->numel(); ++i) scale = std::max(scale, std::abs(x->get(i)));
      for (int64_t i = 0; i < x->numel(); ++i) {
        double d = std::abs(x->get(i) - y->get(i));
        if (std::isnan(x->get(i)) != std::isnan(y->get(i))) d = INFINITY;
        if (!std::isnan(d)) worst = std::max(worst, d);
      }
      EXPECT_LE(worst / scale, 1e-4) << name << " " << f.filename() << ": max abs diff " << worst;
    }
  }
}

}  // namespace
}  // namespace kiln::dump_test
