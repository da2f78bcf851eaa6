// base/openblas.h: which OpenBLAS kernels a process should ask for, and that ringrun gives its
// workers what its own OpenBLAS should have picked (real ringrun, a shell as the worker).
#include "base/openblas.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "runtime/launch/subprocess.h"
#include "support/capture.h"
#include "support/test_paths.h"

namespace ringtorch {
namespace {

TEST(OpenBlasKernels, ASetOlderThanAvx2IsRaisedToTheBestTheCpuHas) {
  const CpuVectorUnits none, avx2{true, false}, avx512{true, true};
  EXPECT_EQ(better_openblas_core("Prescott", avx512), "SkylakeX");  // OpenBLAS's fallback for an unknown model
  EXPECT_EQ(better_openblas_core("Prescott", avx2), "Haswell");
  EXPECT_EQ(better_openblas_core("Sandybridge", avx2), "Haswell");
  EXPECT_EQ(better_openblas_core("Nehalem", none), "") << "nothing better on this CPU";
  EXPECT_EQ(better_openblas_core("Prescott", none), "");
}

TEST(OpenBlasKernels, ItsOwnAvx2ChoicesAndUnknownNamesStand) {
  const CpuVectorUnits avx512{true, true};
  for (const char* own : {"Haswell", "Zen", "Excavator", "SkylakeX", "Cooperlake", "SapphireRapids"}) {
    EXPECT_EQ(better_openblas_core(own, avx512), "") << own;
  }
  EXPECT_EQ(better_openblas_core("", avx512), "") << "not OpenBLAS";
  EXPECT_EQ(better_openblas_core("SomeFutureCore", avx512), "") << "a newer OpenBLAS's name";
}

// The units as libgcc reports them (the OS's support included) against the kernel's own flags.
TEST(OpenBlasKernels, TheCpusUnitsAreThoseItsFlagsList) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line) && line.rfind("flags", 0) != 0) {
  }
  if (line.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo (not x86?)";
  std::set<std::string> flags;
  std::istringstream words(line.substr(line.find(':') + 1));
  for (std::string word; words >> word;) flags.insert(word);
  const auto has = [&](const char* flag) { return flags.count(flag) > 0; };
  const CpuVectorUnits units = this_cpu_vector_units();
  EXPECT_EQ(units.avx2_fma, has("avx2") && has("fma"));
  EXPECT_EQ(units.avx512, has("avx512f") && has("avx512cd") && has("avx512bw") && has("avx512dq") && has("avx512vl"));
}

// A user's OPENBLAS_CORETYPE is theirs: nothing to raise, nothing to say.
TEST(OpenBlasKernels, AUsersSettingIsLeftAlone) {
  if (openblas_kernels().loaded.empty()) GTEST_SKIP() << "the loaded BLAS is not OpenBLAS";
  const char* before = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = before ? before : "";
  for (const char* setting : {"Haswell", ""}) {  // empty too: OpenBLAS loaded by it (base/openblas.cc)
    ::setenv("OPENBLAS_CORETYPE", setting, 1);
    EXPECT_EQ(openblas_kernels().better, "") << "'" << setting << "'";
    EXPECT_EQ(openblas_kernels_advice(), "") << "'" << setting << "'";
  }
  if (before) {
    ::setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
  } else {
    ::unsetenv("OPENBLAS_CORETYPE");
  }
}

std::string worker_coretype(const std::string& launchers_setting, std::string* err) {
  SubprocessOptions spawn;
  const std::string print = "echo \"coretype=[$OPENBLAS_CORETYPE]\"";
  spawn.argv = {testing::build_path("apps/ringrun"),
                "--standalone",
                "--nproc_per_node",
                "1",
                "--use_env",
                "/bin/sh",
                "-c",
                print};
  for (const char* v : {"RANK", "WORLD_SIZE", "RINGTORCH_RUN_ID", "RINGTORCH_RDZV_ENDPOINT"}) spawn.env[v] = "";
  spawn.env["RINGTORCH_LOG_LEVEL"] = "info";  // ringrun's line is checked below
  if (!launchers_setting.empty()) spawn.env["OPENBLAS_CORETYPE"] = launchers_setting;  // else unset, as here
  auto p = Subprocess::spawn(spawn);
  const auto r = testing::finish(p);
  *err = r.err;
  EXPECT_EQ(r.status.code, 0) << r.err;
  const size_t at = r.out.find("coretype=[");
  if (at == std::string::npos) return "(no line)";
  return r.out.substr(at + 10, r.out.find(']', at) - at - 10);
}

// On a CPU its OpenBLAS does not know (this project's CI VMs, family 6 model 207), ringrun's
// workers get the kernels the CPU has and ringrun says so; elsewhere it sets nothing. Either way
// the worker gets what this test's own OpenBLAS (the same library, on the same CPU) should have
// picked, and a user's setting passes unchanged.
TEST(OpenBlasKernels, RingrunGivesItsWorkersWhatItsOwnOpenBlasShouldHavePicked) {
  const OpenBlasKernels own = openblas_kernels();
  if (own.loaded.empty()) GTEST_SKIP() << "the loaded BLAS is not OpenBLAS";
  if (std::getenv("OPENBLAS_CORETYPE")) GTEST_SKIP() << "OPENBLAS_CORETYPE is set: not OpenBLAS's own pick";
  std::string err;
  EXPECT_EQ(worker_coretype("", &err), own.better) << "OpenBLAS picked " << own.loaded;
  EXPECT_EQ(err.find("OpenBLAS picked its ") != std::string::npos, !own.better.empty()) << err;
  EXPECT_EQ(worker_coretype("Haswell", &err), "Haswell");
  EXPECT_EQ(err.find("OpenBLAS picked"), std::string::npos) << err;
}

}  // namespace
}  // namespace ringtorch
