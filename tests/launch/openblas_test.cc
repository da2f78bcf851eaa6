// base/openblas.h: which OpenBLAS kernels a process should ask for, and that ringrun gives its
// workers what its own OpenBLAS should have picked (real ringrun, a shell as the worker).
#include "base/openblas.h"

#include <gtest/gtest.h>

#include <cstdlib>

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

// A user's OPENBLAS_CORETYPE is theirs: nothing to raise, nothing to say.
TEST(OpenBlasKernels, AUsersSettingIsLeftAlone) {
  if (openblas_kernels().loaded.empty()) GTEST_SKIP() << "the loaded BLAS is not OpenBLAS";
  const char* before = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = before ? before : "";
  ::setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  EXPECT_EQ(openblas_kernels().better, "");
  EXPECT_EQ(openblas_kernels_advice(), "");
  if (before) {
    ::setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
  } else {
    ::unsetenv("OPENBLAS_CORETYPE");
  }
}

std::string worker_coretype(const std::string& launchers_setting, std::string* err) {
  SubprocessOptions spawn;
  spawn.argv = {testing::build_path("apps/ringrun"), "--standalone", "--nproc_per_node", "1", "--use_env", "/bin/sh",
                "-c", "echo \"coretype=[$OPENBLAS_CORETYPE]\""};
  for (const char* v : {"RANK", "WORLD_SIZE", "RINGTORCH_RUN_ID", "RINGTORCH_RDZV_ENDPOINT"}) spawn.env[v] = "";
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
  if (std::getenv("OPENBLAS_CORETYPE")) GTEST_SKIP() << "OPENBLAS_CORETYPE is set for this test: its own kernels are not OpenBLAS's pick";
  std::string err;
  EXPECT_EQ(worker_coretype("", &err), own.better) << "OpenBLAS picked " << own.loaded;
  EXPECT_EQ(err.find("OpenBLAS picked its ") != std::string::npos, !own.better.empty()) << err;
  EXPECT_EQ(worker_coretype("Haswell", &err), "Haswell");
  EXPECT_EQ(err.find("OpenBLAS picked"), std::string::npos) << err;
}

}  // namespace
}  // namespace ringtorch
