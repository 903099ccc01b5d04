// The `kiln` program as a user runs it: real binary, real files, exact error messages.
#include <gtest/gtest.h>

#include "tests/support/shell.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "onnx/proto.h"
#include "tools/npy.h"

namespace fs = std::filesystem;

namespace {

using Result = kiln::testing::CommandResult;

Result run_kiln(const std::string& args) {
  std::string cmd = std::string(KILN_BINARY) + " " + args + " 2>&1";
  return kiln::testing::run_shell(cmd);
}

class KilnCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  std::string npy(const std::string& name, kiln::ir::DType t, kiln::ir::Shape s, double fill) {
    auto h = kiln::ir::HostTensor::zeros(t, s);
    for (int64_t i = 0; i < h.numel(); ++i) h.set(i, fill + i);
    auto path = (dir_ / name).string();
    EXPECT_TRUE(kiln::tools::write_npy(path, h).has_value());
    return path;
  }
  fs::path dir_;
};

const char* kAddGraph =
    "kiln.graph v1\n"
    "input %x : f32[2,3]\n"
    "input %b : f32[3]\n"
    "%y = add(%x, %b)\n"
    "%z = mul(%y, 2)\n"
    "output %z\n";

// A matmul kernel's flops compare with the device's measured contraction rate, not with the
// elementwise compute rate (against which a 64^3 product read as several times the peak).
TEST_F(KilnCli, AMatmulKernelsAchievedFlopsCompareWithTheContractionRate) {
  auto g = write("mm.kg",
                 "kiln.graph v1\n"
                 "input %a : f32[64,64]\n"
                 "input %b : f32[64,64]\n"
                 "%c = matmul(%a, %b)\n"
                 "output %c\n");
  auto stats = dir_ / "stats.json";
  // The rates measured on this machine (the suite's are the fixed reference rates, which have
  // no contraction rate of their own).
  Result r = kiln::testing::run_shell("KILN_CPU_RATES=measured " + std::string(KILN_BINARY) +
                                      " run " + g + " --random-inputs --repeat 3 --stats --stats-json " +
                                      stats.string() + " 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("GFLOP/s in matmul and attention kernels"), std::string::npos) << r.out;
  auto c = nlohmann::json::parse(std::ifstream(stats));
  ASSERT_EQ(c["kernel_profile"].size(), 1u);
  const auto& k = c["kernel_profile"][0];
  const double peak = c["limits"]["matmul_gflop_per_s"].get<double>();
  EXPECT_GT(peak, 0.0);
  EXPECT_DOUBLE_EQ(k["peak_gflop_per_s"].get<double>(), peak);
  EXPECT_NEAR(k["of_compute"].get<double>(), k["gflop_per_s"].get<double>() / peak, 1e-9);
}

TEST_F(KilnCli, RunWritesOutputsAndStatsJson) {
  auto g = write("g.kg", kAddGraph);
  auto x = npy("x.npy", kiln::ir::DType::f32, {2, 3}, 0);
  auto b = npy("b.npy", kiln::ir::DType::f32, {3}, 10);
  auto out = dir_ / "out";
  auto stats = dir_ / "stats.json";
  Result r = run_kiln("run " + g + " --input x=" + x + " --input %b=" + b + " --out " +
                      out.string() + " --stats-json " + stats.string());
  ASSERT_EQ(r.code, 0) << r.out;
  auto z = kiln::tools::read_npy((out / "z.npy").string());
  ASSERT_TRUE(z.has_value()) << z.error().message;
  ASSERT_EQ(z->shape, (kiln::ir::Shape{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(z->get(i), 2 * (i + 10 + i % 3));
  auto j = nlohmann::json::parse(std::ifstream(stats));
  EXPECT_EQ(j["kernels"], 1);
  EXPECT_EQ(j["compiled"], 1);
  EXPECT_TRUE(j["compile_ms"].is_number());
  EXPECT_TRUE(j["run_ms"].is_number());
  ASSERT_EQ(j["groups"].size(), 1u);
  EXPECT_EQ(j["groups"][0].back(), "%z");
}

// Integer outputs are printed whole (an i64 past 2^53 too, and its sum), floats to 6 digits.
TEST_F(KilnCli, RunPrintsIntegersWhole) {
  auto g = write("i.kg",
                 "kiln.graph v1\n%y = arange(start=9007199254740993, end=9007199254740996, step=1, "
                 "dtype=i64)\n%z = mul(%y, %y)\n%f = full(shape=[2], value=1234567.5, dtype=f64)\n"
                 "output %y\noutput %f\n");
  Result r = run_kiln("run " + g);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("%y : i64[3] = [9007199254740993, 9007199254740994, 9007199254740995]  "
                       "sum=27021597764222982 abs_sum=27021597764222982"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("%f : f64[2] = [1.23457e+06, 1.23457e+06]"), std::string::npos) << r.out;
}

// --stats and --stats-json give the kernels' own time beside run_ms: on a GPU from timestamps, on
// the cpu from the clock around each launch over the thread pool (one executor times both).
TEST_F(KilnCli, StatsGiveTheKernelsDeviceTime) {
  auto g = write("g.kg", kAddGraph);
  auto stats = dir_ / "stats.json";
  Result cpu = run_kiln("run " + g + " --random-inputs --repeat 3 --stats --stats-json " + stats.string());
  ASSERT_EQ(cpu.code, 0) << cpu.out;
  EXPECT_NE(cpu.out.find("ms in kernels (median of 3)"), std::string::npos) << cpu.out;
  auto c = nlohmann::json::parse(std::ifstream(stats));
  EXPECT_GT(c["device_ms"].get<double>(), 0.0);
  EXPECT_LE(c["device_ms"].get<double>(), c["run_ms"].get<double>());
  // The kernel profile: each kernel's median time, share and achieved rates against the limits.
  EXPECT_NE(cpu.out.find("kernel time (median of 3); limits "), std::string::npos) << cpu.out;
  ASSERT_EQ(c["kernel_profile"].size(), 1u);
  const auto& k = c["kernel_profile"][0];
  EXPECT_EQ(k["name"], "k0");
  EXPECT_GT(k["ms"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(k["share"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(k["bytes"].get<double>(), (6 + 3 + 6) * 4);  // x, b, z once each
  EXPECT_DOUBLE_EQ(k["flops"].get<double>(), 12);                // an add and a mul per element
  EXPECT_DOUBLE_EQ(k["gb_per_s"].get<double>(), 60 / (k["ms"].get<double>() * 1e6));
  EXPECT_GT(c["limits"]["bandwidth_gb_per_s"].get<double>(), 0.0);
  EXPECT_GT(c["limits"]["gflop_per_s"].get<double>(), 0.0);
  EXPECT_GT(c["limits"]["matmul_gflop_per_s"].get<double>(), 0.0);
  // An elementwise kernel's flops compare with the device's compute rate.
  EXPECT_DOUBLE_EQ(k["peak_gflop_per_s"].get<double>(), c["limits"]["gflop_per_s"].get<double>());
  // Where the time outside the kernels goes: the structural key and the plan lookup.
  EXPECT_NE(cpu.out.find("overhead: key "), std::string::npos) << cpu.out;
  EXPECT_GT(c["key_ms"].get<double>(), 0.0);
  EXPECT_GE(c["lookup_ms"].get<double>(), 0.0);
  // The first run against the median, and the page faults of each.
  EXPECT_NE(cpu.out.find("x the median; page faults: "), std::string::npos) << cpu.out;
  EXPECT_GT(c["first_run_ms"].get<double>(), 0.0);
  EXPECT_GE(c["page_faults"]["first_run"].get<int64_t>(), 0);
  EXPECT_GE(c["page_faults"]["median_run"].get<int64_t>(), 0);
  Result gpu =
      run_kiln("run " + g + " --random-inputs --device vulkan:0 --repeat 3 --stats --stats-json " +
               stats.string());
  if (gpu.out.find("vulkan:0 is not available") != std::string::npos ||
      gpu.out.find("libvulkan") != std::string::npos)
    GTEST_SKIP() << gpu.out;
  ASSERT_EQ(gpu.code, 0) << gpu.out;
  EXPECT_NE(gpu.out.find("ms in kernels (median of 3)"), std::string::npos) << gpu.out;
  auto j = nlohmann::json::parse(std::ifstream(stats));
  ASSERT_TRUE(j["device_ms"].is_number());
  EXPECT_GT(j["device_ms"].get<double>(), 0.0);
  EXPECT_LE(j["device_ms"].get<double>(), j["run_ms"].get<double>());
}

// kiln dump --stage groups --measure: each kernel's estimate next to its measured median time.
TEST_F(KilnCli, DumpMeasurePutsEachEstimateNextToItsTime) {
  auto g = write("g.kg", kAddGraph);
  Result r = run_kiln("dump " + g + " --stage groups --measure --repeat 2");
  ASSERT_EQ(r.code, 0) << r.out;
  const size_t at = r.out.find("measured on cpu (median of 2 runs):");
  ASSERT_NE(at, std::string::npos) << r.out;
  std::istringstream rows(r.out.substr(r.out.find("\n  k0", at)));
  std::string name;
  double estimate = 0, measured = 0, ratio = 0;
  rows >> name >> estimate >> measured >> ratio;
  EXPECT_EQ(name, "k0");
  EXPECT_GT(estimate, 0.0);
  EXPECT_GT(measured, 0.0);
  EXPECT_NEAR(ratio, estimate / measured, 0.01 + 0.01 * ratio);
  Result bad = run_kiln("dump " + g + " --stage kernels --measure");
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.out, "kiln: error: --measure applies to --stage groups (text)\n");
}

// ONNX's small CNN (libonnx-testdata) run as a user runs it: its input TensorProto bound with
// --input NAME=input_0.pb, the output written as .npy and compared with output_0.pb (ONNX's
// backend tolerances, rtol 1e-3, atol 1e-7), on cpu and on vulkan:0.
TEST_F(KilnCli, RunsAnOnnxModelOnItsTestDataSet) {
  const fs::path dir = "/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d";
  if (!fs::exists(dir / "model.onnx")) GTEST_SKIP() << "libonnx-testdata is not installed";
  auto read = [](const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  auto want_proto = kiln::onnx::parse_tensor(read(dir / "test_data_set_0/output_0.pb"));
  ASSERT_TRUE(want_proto.has_value());
  auto want = kiln::onnx::to_host_tensor(*want_proto);
  ASSERT_TRUE(want.has_value());
  for (const std::string device : {"cpu", "vulkan:0"}) {
    const fs::path out = dir_ / ("onnx_" + device.substr(0, 3));
    Result r = run_kiln("run " + (dir / "model.onnx").string() + " --input 0=" +
                        (dir / "test_data_set_0/input_0.pb").string() + " --device " + device +
                        " --out " + out.string());
    ASSERT_EQ(r.code, 0) << r.out;
    auto got = kiln::tools::read_npy((out / "3.npy").string());
    ASSERT_TRUE(got.has_value()) << r.out;
    ASSERT_EQ(got->shape, want->shape);
    for (int64_t i = 0; i < want->numel(); ++i)
      ASSERT_LE(std::abs(got->get(i) - want->get(i)), 1e-7 + 1e-3 * std::abs(want->get(i)))
          << device << " element " << i;
  }
}

TEST_F(KilnCli, MissingInputIsOneClearError) {
  auto g = write("g.kg", kAddGraph);
  Result r = run_kiln("run " + g + " --input x=" + npy("x.npy", kiln::ir::DType::f32, {2, 3}, 0) +
                      " --out " + (dir_ / "out").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out,
            "kiln: error: missing input '%b' (f32[3]): pass --input b=PATH.npy (or an ONNX TensorProto PATH.pb) or --random-inputs\n");
  EXPECT_FALSE(fs::exists(dir_ / "out" / "z.npy"));
}

// More than the machine holds: one line naming the device, bytes and tensor; exit 1, no signal.
TEST_F(KilnCli, AnAllocationThatCannotBeMetIsOneClearError) {
  auto input = write("in.kg", "kiln.graph v1\ninput %x : f32[100000000000]\n%y = exp(%x)\noutput %y\n");
  Result r = run_kiln("run " + input + " --random-inputs");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out,
            "kiln: error: out of memory on the host: cannot allocate 400000000000 bytes for "
            "--random-inputs of input '%x' (f32[100000000000])\n");
  auto result = write("out.kg",
                      "kiln.graph v1\ninput %x : f32[1]\n%y = expand(%x, shape=[100000000000])\n"
                      "%z = exp(%y)\noutput %z\n");
  r = run_kiln("run " + result + " --random-inputs --device cpu");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out,
            "kiln: error: out of memory on device 'cpu': cannot allocate 400000000000 bytes for "
            "%z (f32[100000000000])\n");
  r = run_kiln("run " + result + " --random-inputs --device reference");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out,
            "kiln: error: out of memory on device 'reference': cannot allocate 800000000000 bytes "
            "for %y (f32[100000000000] held as f64)\n");
}

TEST_F(KilnCli, WrongDtypeNpyNamesInputExpectedAndGiven) {
  auto g = write("g.kg", kAddGraph);
  auto x = npy("x.npy", kiln::ir::DType::f64, {2, 3}, 0);
  Result r = run_kiln("run " + g + " --input x=" + x + " --random-inputs");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "kiln: error: input '%x': expected f32[2,3], got f64[2,3] from '" + x + "'\n");
}

// An input of another size along a size symbol's axis: the error says which --dim takes it.
TEST_F(KilnCli, AnInputOfAnotherSymbolSizeNamesTheDimThatTakesIt) {
  auto g = write("s.kg", "kiln.graph v1\ninput %x : f32[?b=2,3]\n%y = relu(%x)\noutput %y\n");
  auto x = npy("x5.npy", kiln::ir::DType::f32, {5, 3}, 0);
  Result r = run_kiln("run " + g + " --input x=" + x);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "kiln: error: input '%x': expected f32[2,3], got f32[5,3] from '" + x +
                       "'; to run at the file's size, pass --dim b=5\n");
  r = run_kiln("run " + g + " --input x=" + x + " --dim b=5");
  EXPECT_EQ(r.code, 0) << r.out;
  // A file that differs in a fixed axis as well: no --dim would take it, so none is named.
  auto y = npy("y.npy", kiln::ir::DType::f32, {5, 4}, 0);
  r = run_kiln("run " + g + " --input x=" + y);
  EXPECT_EQ(r.out, "kiln: error: input '%x': expected f32[2,3], got f32[5,4] from '" + y + "'\n");
}

// `kiln dump` names the size symbol of a dynamic kernel's outer axis (`?`): from the input it reads,
// or, for a kernel that reads only what another wrote, the one leading symbol of its extent.
TEST_F(KilnCli, TheKernelsDumpNamesEachDynamicAxissSymbol) {
  auto g = write("m.kg",
                 "kiln.graph v1\ninput %x : f32[?b=6,8]\ninput %w : f32[8,4]\n"
                 "%m = matmul(%x, %w)\n%h = relu(%m)\n%y = softmax(%h, axis=1)\n"
                 "%z = add(%y, %y)\noutput %h\noutput %z\n");
  Result r = run_kiln("dump " + g + " --stage kernels --fuser first");
  ASSERT_EQ(r.code, 0) << r.out;
  // One kernel a value: the matmul and the row kernels keep the batch axis outermost (k1, the
  // relu over b * 4 points flattened, has no symbol of its own and is not named).
  const auto count = [&](const std::string& text) {
    size_t n = 0;
    for (size_t at = 0; (at = r.out.find(text, at)) != std::string::npos; ++at) ++n;
    return n;
  };
  EXPECT_EQ(count("# k0: %m\n# ? is ?b\nkernel k0"), 1u) << r.out;
  EXPECT_EQ(count("# ? is ?b\nkernel k"), 4u) << r.out;
  EXPECT_EQ(count("# ? is ?b\nkernel k"), count("  domain [?,")) << r.out;
}

// Output that cannot be written is an error (rc 1, one line), not an abort (a failed write threw
// out of main: rc 134) or a silent rc 0 (buffered output failed at exit, unchecked).
TEST_F(KilnCli, OutputThatCannotBeWrittenIsAnError) {
  auto g = write("g.kg", kAddGraph);
  for (const std::string& args :
       {"run " + g + " --random-inputs --no-autotune", "dump " + g + " --stage source",
        "dump " + g + " --format html"}) {
    auto r = kiln::testing::run_shell(std::string(KILN_BINARY) + " " + args + " 2>&1 >/dev/full");
    EXPECT_EQ(r.code, 1) << args << ": " << r.out;
    EXPECT_NE(r.out.find("kiln: error: cannot write"), std::string::npos) << args << ": " << r.out;
    EXPECT_NE(r.out.find("No space left on device"), std::string::npos) << args << ": " << r.out;
  }
}

TEST_F(KilnCli, TruncatedNpyIsAnErrorAndWritesNothing) {
  auto g = write("g.kg", kAddGraph);
  auto x = npy("x.npy", kiln::ir::DType::f32, {2, 3}, 0);
  fs::resize_file(x, fs::file_size(x) - 5);
  Result r = run_kiln("run " + g + " --input x=" + x + " --random-inputs --out " +
                      (dir_ / "out").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find(x), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("truncated"), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_FALSE(fs::exists(dir_ / "out" / "z.npy"));
}

TEST_F(KilnCli, UnknownOpAndShapeMismatchPointAtTheLine) {
  auto g1 = write("bad_op.kg", "kiln.graph v1\ninput %x : f32[4]\n%y = frobnicate(%x)\noutput %y\n");
  Result r1 = run_kiln("run " + g1 + " --random-inputs");
  EXPECT_EQ(r1.code, 1);
  EXPECT_EQ(r1.out, g1 + ":3:6: error: unknown op 'frobnicate'\n");
  auto g2 = write("bad_shape.kg",
                  "kiln.graph v1\ninput %x : f32[3,4]\ninput %z : f32[5]\n%y = add(%x, %z)\noutput %y\n");
  Result r2 = run_kiln("run " + g2 + " --random-inputs");
  EXPECT_EQ(r2.code, 1);
  EXPECT_EQ(r2.out, g2 + ":4:6: error: add: shapes [3,4] and [5] do not broadcast\n");
}

TEST_F(KilnCli, UnknownDeviceAndUnknownInputName) {
  auto g = write("g.kg", kAddGraph);
  Result r = run_kiln("run " + g + " --random-inputs --device tpu:0");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(r.out.starts_with("kiln: error: unknown device 'tpu:0' (available: cpu, reference"))
      << r.out;
  Result bad = run_kiln("run " + g + " --random-inputs --device vulkan:one");
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.out, "kiln: error: bad device name 'vulkan:one' (expected vulkan:N, e.g. vulkan:0)\n");
  Result r2 = run_kiln("run " + g + " --random-inputs --input q=" +
                       npy("q.npy", kiln::ir::DType::f32, {3}, 0));
  EXPECT_EQ(r2.code, 1);
  EXPECT_EQ(r2.out, "kiln: error: --input q: the graph has no input '%q'\n");
}

TEST_F(KilnCli, CpuAndReferenceAgree) {
  auto g = write("g.kg",
                 "kiln.graph v1\ninput %x : f32[16,32]\n%s = softmax(%x)\n%l = log_softmax(%x, axis=0)\n"
                 "%m = argmax(%x, axis=1)\noutput %s\noutput %l\noutput %m\n");
  ASSERT_EQ(run_kiln("run " + g + " --random-inputs --seed 3 --out " + (dir_ / "c").string()).code, 0);
  ASSERT_EQ(run_kiln("run " + g + " --random-inputs --seed 3 --device reference --out " +
                     (dir_ / "r").string())
                .code,
            0);
  for (std::string name : {"s", "l", "m"}) {
    auto a = kiln::tools::read_npy((dir_ / "c" / (name + ".npy")).string());
    auto b = kiln::tools::read_npy((dir_ / "r" / (name + ".npy")).string());
    ASSERT_TRUE(a && b);
    for (int64_t i = 0; i < a->numel(); ++i) ASSERT_NEAR(a->get(i), b->get(i), 2e-5) << name << i;
  }
}

TEST_F(KilnCli, DumpShowsOneKernelForGeluChainAndVectorIr) {
  std::string ew = std::string(KILN_SOURCE_DIR) + "/examples/ew_chain.kg";
  Result k = run_kiln("dump " + ew + " --stage kernels");
  ASSERT_EQ(k.code, 0) << k.out;
  EXPECT_EQ(k.out.rfind("# 1 kernel\n", 0), 0u) << k.out;
  Result l = run_kiln("dump " + ew + " --stage llvm");
  ASSERT_EQ(l.code, 0) << l.out;
  EXPECT_NE(l.out.find("<8 x float>"), std::string::npos);
  Result s = run_kiln("dump " + std::string(KILN_SOURCE_DIR) + "/examples/softmax.kg --stage kernels");
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_LE(std::stoi(s.out.substr(2)), 3) << s.out;
  Result gr = run_kiln("dump " + ew + " --stage graph");
  ASSERT_EQ(gr.code, 0) << gr.out;
  EXPECT_NE(gr.out.find("gelu("), std::string::npos) << gr.out;
}

}  // namespace
