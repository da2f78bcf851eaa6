// Checks of model replicas on thread ranks (thread_ranks.h): the group the helper owns lent as
// the shared_ptr DistributedDataParallel and LocalSgd take, a model's parameters as one tensor,
// and bitwise equality of a tensor across the ranks (an allgather: every rank calls it).
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include <ringtorch/process_group.h>

namespace ringtorch::testing {

// The thread-rank helper owns the group; this shared_ptr does not.
inline std::shared_ptr<ProcessGroup> borrow(ProcessGroup& group) {
  return {&group, [](ProcessGroup*) {}};
}

inline at::Tensor flat_parameters(torch::nn::Module& m) {
  std::vector<at::Tensor> parts;
  for (auto& p : m.parameters()) parts.push_back(p.detach().reshape({-1}));
  return torch::cat(parts);
}

// Bitwise: every rank holds exactly this rank's `t` (float32). `what` names it in a failure.
inline void expect_same_on_every_rank(ProcessGroup& group, const at::Tensor& t, const std::string& what) {
  const at::Tensor mine = t.contiguous().reshape({-1});
  at::Tensor all = at::empty({mine.numel() * group.size()}, mine.options());
  group.allgather(mine, all);
  for (int r = 0; r < group.size(); ++r) {
    EXPECT_TRUE(at::equal(all.narrow(0, r * mine.numel(), mine.numel()), mine))
        << what << ": rank " << r << " differs from rank " << group.rank();
  }
}

inline void expect_identical_across_ranks(ProcessGroup& group, torch::nn::Module& m, const std::string& when) {
  expect_same_on_every_rank(group, flat_parameters(m), "the parameters " + when);
}

}  // namespace ringtorch::testing
