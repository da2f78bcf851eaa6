// DistributedSampler against Python's, run during the test with Debian's python3-torch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <ringtorch/distributed_sampler.h>
#include <ringtorch/error.h>

#include "runtime/launch/subprocess.h"
#include "support/capture.h"
#include "support/test_paths.h"

namespace ringtorch {
namespace {

// FNV-1a 64 over "i0,i1,...," as python_sampler.py --digest computes it.
std::string digest(const std::vector<int64_t>& indices) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int64_t i : indices) {
    for (char c : std::to_string(i) + ",") h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(h));
  return text;
}

DistributedSampler sampler_for(const nlohmann::json& c) {
  DistributedSampler sampler(c["n"].get<int64_t>(), c["replicas"].get<int>(), c["rank"].get<int>(),
                             {c["shuffle"].get<bool>(), c["seed"].get<uint64_t>(), c["drop_last"].get<bool>()});
  sampler.set_epoch(c["epoch"].get<int64_t>());
  return sampler;
}

std::vector<nlohmann::json> stored_digests() {
  std::istringstream lines(testing::read_file(testing::source_path("tests/datasets/python_sampler_digests.jsonl")));
  std::vector<nlohmann::json> cases;
  for (std::string line; std::getline(lines, line);) cases.push_back(nlohmann::json::parse(line));
  return cases;
}

// Live against Python when /usr/bin/python3 has torch (and the stored digests checked against
// the same live output); against the stored digests of Python's output otherwise.
TEST(DistributedSampler, IdenticalToPythonsForTheWholeGrid) {
  const auto stored = stored_digests();
  ASSERT_GE(stored.size(), 200u);
  std::string live_output;
  if (::access("/usr/bin/python3", X_OK) == 0) {
    SubprocessOptions spawn;
    spawn.argv = {"/usr/bin/python3", testing::source_path("tests/datasets/python_sampler.py")};
    auto python = Subprocess::spawn(spawn);
    auto [status, out, err] = testing::finish(python);
    if (status.success()) {
      live_output = out;
    } else {
      ASSERT_NE(err.find("No module named 'torch'"), std::string::npos) << err;
    }
  }
  if (live_output.empty()) {
    for (const auto& c : stored) {
      auto sampler = sampler_for(c);
      ASSERT_EQ(digest(sampler.indices()), c["digest"].get<std::string>()) << c.dump();
      ASSERT_EQ(sampler.num_samples(), c["len"].get<int64_t>());
    }
    std::cout << "python3-torch absent: compared against " << stored.size() << " stored digests\n";
    return;
  }
  std::istringstream lines(live_output);
  size_t cases = 0;
  for (std::string line; std::getline(lines, line); ++cases) {
    auto c = nlohmann::json::parse(line);
    auto sampler = sampler_for(c);
    auto expected = c["indices"].get<std::vector<int64_t>>();
    ASSERT_EQ(sampler.indices(), expected) << line.substr(0, 200);
    ASSERT_EQ(sampler.num_samples(), c["len"].get<int64_t>());
    ASSERT_LT(cases, stored.size());
    EXPECT_EQ(digest(expected), stored[cases]["digest"].get<std::string>())
        << "stored digest out of date: " << line.substr(0, 120);
  }
  EXPECT_EQ(cases, stored.size());
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

// Note [Resuming inside an epoch]: 3 ranks train k steps of batch b, the job restarts with 2
// ranks from the recorded position k x b x 3: every index of the epoch is trained exactly once,
// apart from the padding that evens out the second run's ranks.
TEST(DistributedSampler, ResumingWithAnotherWorldSizeTrainsTheRestOfTheEpochOnce) {
  const int64_t size = 1000, batch = 8, steps_before = 20;
  const SamplerOptions options{true, 3, false};
  std::vector<int> trained(size, 0);
  for (int r = 0; r < 3; ++r) {
    DistributedSampler before(size, 3, r, options);
    before.set_epoch(5);
    const auto mine = before.indices();
    for (int64_t i = 0; i < steps_before * batch; ++i) trained[mine[i]]++;
  }
  int64_t padded = 0;
  for (int r = 0; r < 2; ++r) {
    DistributedSampler after(size, 2, r, options);
    after.set_epoch(5);
    after.set_start(steps_before * batch * 3);
    EXPECT_EQ(after.num_samples(), (size - 480 + 1) / 2);
    for (int64_t i : after.indices()) trained[i]++;
    padded += after.num_samples();
  }
  EXPECT_EQ(padded, 520) << "520 left for 2 ranks: no padding";
  EXPECT_TRUE(std::all_of(trained.begin(), trained.end(), [](int n) { return n == 1; }));
  DistributedSampler whole(size, 2, 0, options);
  whole.set_epoch(5);
  whole.set_start(480);
  whole.set_start(0);
  DistributedSampler plain(size, 2, 0, options);
  plain.set_epoch(5);
  EXPECT_EQ(whole.indices(), plain.indices()) << "start 0: the whole epoch";
  EXPECT_EQ(whole.num_samples(), 500);
  EXPECT_THROW(whole.set_start(size + 1), InvalidArgumentError);
}

TEST(DistributedSampler, BadArgumentsAreNamed) {
  EXPECT_THROW(DistributedSampler(10, 0, 0), InvalidArgumentError);
  EXPECT_THROW(DistributedSampler(10, 2, 2), InvalidArgumentError);
  EXPECT_THROW(DistributedSampler(-1, 2, 0), InvalidArgumentError);
}

}  // namespace
}  // namespace ringtorch
