// DistributedSampler against Python's, run during the test with Debian's python3-torch.
#include "datasets/distributed_sampler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "rendezvous/error.h"
#include "runtime/launch/subprocess.h"
#include "support/capture.h"
#include "support/test_paths.h"

namespace ringtorch {
namespace {

TEST(DistributedSampler, IdenticalToPythonsForTheWholeGrid) {
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  SpawnOptions spawn;
  spawn.argv = {"/usr/bin/python3", testing::source_path("tests/datasets/python_sampler.py")};
  auto python = Subprocess::spawn(spawn);
  auto [status, out, err] = testing::finish(python);
  if (status.code != 0 && err.find("No module named 'torch'") != std::string::npos) {
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt-get install python3-torch)";
  }
  ASSERT_TRUE(status.success()) << err;

  std::istringstream lines(out);
  std::string line;
  int cases = 0;
  while (std::getline(lines, line)) {
    auto c = nlohmann::json::parse(line);
    DistributedSampler sampler(c["n"].get<int64_t>(), c["replicas"].get<int>(), c["rank"].get<int>(),
                               {c["shuffle"].get<bool>(), c["seed"].get<uint64_t>(), c["drop_last"].get<bool>()});
    sampler.set_epoch(c["epoch"].get<int64_t>());
    auto expected = c["indices"].get<std::vector<int64_t>>();
    ASSERT_EQ(sampler.indices(), expected) << line.substr(0, 200);
    ASSERT_EQ(sampler.num_samples(), c["len"].get<int64_t>());
    ++cases;
  }
  EXPECT_GE(cases, 200);
}

TEST(DistributedSampler, RanksPartitionAPaddedEpoch) {
  for (bool drop_last : {false, true}) {
    std::vector<int> seen(17, 0);
    int64_t total = 0;
    for (int r = 0; r < 3; ++r) {
      DistributedSampler s(17, 3, r, {true, 7, drop_last});
      for (int64_t i : s.indices()) seen[i]++;
      total += static_cast<int64_t>(s.indices().size());
    }
    EXPECT_EQ(total, drop_last ? 15 : 18);
  }
}

TEST(DistributedSampler, BadArgumentsAreNamed) {
  EXPECT_THROW(DistributedSampler(10, 0, 0), InvalidArgumentError);
  EXPECT_THROW(DistributedSampler(10, 2, 2), InvalidArgumentError);
  EXPECT_THROW(DistributedSampler(-1, 2, 0), InvalidArgumentError);
}

}  // namespace
}  // namespace ringtorch
