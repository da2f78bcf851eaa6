// ProcessGroup collectives, N ranks as threads over one in-memory store, Gloo over loopback TCP.
// Closed-form expectations: rank r contributes values derived from r and the element index.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <ringtorch/error.h>
#include <ringtorch/process_group.h>

#include "rendezvous/deadline_store.h"
#include "runtime/comm/allreduce_algorithm.h"
#include "support/thread_ranks.h"

namespace ringtorch {
namespace {

using std::chrono::milliseconds;

void on_ranks(int n, const std::function<void(ProcessGroup&)>& body, milliseconds timeout = milliseconds(30000),
              ProcessGroupOptions options = {}) {
  testing::on_thread_ranks(n, body, timeout, std::move(options));
}

const std::vector<at::ScalarType> kDtypes = {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16,
                                             at::kInt,   at::kLong,   at::kByte};
const std::vector<int64_t> kCounts = {0, 1, 7, 1000, 1 << 16};
// Every algorithm a group can be told to use instead of auto's choice.
const std::vector<AllreduceAlgorithm> kForcedAlgorithms = {AllreduceAlgorithm::kDirect, AllreduceAlgorithm::kRing,
                                                           AllreduceAlgorithm::kBcube};

// Rank r's input: element i holds 1 + (r + i) % 2 (small values, exact in every dtype, and
// products of up to 8 of them stay exact).
at::Tensor input_for(int rank, int64_t count, at::ScalarType dtype) {
  return (at::arange(count, at::kLong).add(rank).remainder(2).add(1)).to(dtype);
}

at::Tensor expected_for(ReduceOp op, int world, int64_t count, at::ScalarType dtype) {
  at::Tensor acc = input_for(0, count, at::kDouble);
  for (int r = 1; r < world; ++r) {
    at::Tensor x = input_for(r, count, at::kDouble);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc = acc + x;
        break;
      case ReduceOp::kProduct:
        acc = acc * x;
        break;
      case ReduceOp::kMin:
        acc = at::minimum(acc, x);
        break;
      case ReduceOp::kMax:
        acc = at::maximum(acc, x);
        break;
    }
  }
  if (op == ReduceOp::kAvg) acc = acc / world;
  return acc.to(dtype);
}

TEST(ProcessGroup, AllreduceEveryOpDtypeAndCountAtWorldSizes1To8) {
  for (int world : {1, 2, 3, 4, 8}) {
    on_ranks(world, [&](ProcessGroup& group) {
      for (auto op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
        for (auto dtype : kDtypes) {
          if (op == ReduceOp::kAvg && !at::isFloatingType(dtype)) continue;
          for (int64_t count : kCounts) {
            at::Tensor t = input_for(group.rank(), count, dtype);
            group.allreduce(t, op);
            at::Tensor want = expected_for(op, world, count, dtype);
            ASSERT_TRUE(at::equal(t, want)) << "world " << world << " " << reduce_op_name(op) << " "
                                            << c10::toString(dtype) << " count " << count << " rank " << group.rank();
          }
        }
      }
    });
  }
}

// Every algorithm, forced, at sizes on both sides of auto's thresholds: random floats (so the
// order of additions shows), results close to the exact sum and bit-identical on every rank.
TEST(ProcessGroup, EveryAllreduceAlgorithmGivesEveryRankTheSameBits) {
  for (auto algorithm : kForcedAlgorithms) {
    for (int world : {2, 3, 4}) {
      ProcessGroupOptions options;
      options.allreduce_algorithm = algorithm;
      on_ranks(
          world,
          [&](ProcessGroup& group) {
            for (int64_t count : {1, 7, 1000, 1 << 17}) {
              auto generator = at::detail::createCPUGenerator(1234 + group.rank());
              at::Tensor mine = at::rand({count}, generator, at::kFloat);
              at::Tensor sum = mine.clone();
              group.allreduce(sum);
              at::Tensor everyone_input = at::empty({count * world});
              group.allgather(mine, everyone_input);
              at::Tensor exact = everyone_input.to(at::kDouble).view({world, count}).sum(0);
              ASSERT_TRUE(at::allclose(sum.to(at::kDouble), exact, 1e-5, 1e-5))
                  << allreduce_algorithm_name(algorithm) << " world " << world << " count " << count;
              at::Tensor everyone_result = at::empty({count * world});
              group.allgather(sum, everyone_result);
              for (int r = 0; r < world; ++r) {
                ASSERT_TRUE(at::equal(everyone_result.narrow(0, r * count, count), sum))
                    << allreduce_algorithm_name(algorithm) << ": rank " << r << " differs from rank " << group.rank()
                    << " (world " << world << ", count " << count << ")";
              }
            }
          },
          milliseconds(30000), options);
    }
  }
}

// A NaN held by any one rank comes out of min and max on every rank, whatever the algorithm and
// that rank's place in the reduction order (Gloo's own std::min keeps only the accumulator's).
TEST(ProcessGroup, MinAndMaxGiveNaNWhereAnyRankHoldsOne) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto algorithm : kForcedAlgorithms) {
    for (int world : {2, 3}) {
      ProcessGroupOptions options;
      options.allreduce_algorithm = algorithm;
      on_ranks(
          world,
          [&](ProcessGroup& group) {
            for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
              for (int64_t count : {int64_t{4}, int64_t{1} << 16}) {
                // Element r holds NaN on rank r only (the last element on no rank); the rest rank + 1.
                at::Tensor input = at::full({count}, group.rank() + 1.0f);
                input[group.rank()] = nan;
                for (auto op : {ReduceOp::kMin, ReduceOp::kMax}) {
                  at::Tensor t = input.to(dtype, /*non_blocking=*/false, /*copy=*/true);  // float: not in place
                  group.allreduce(t, op);
                  at::Tensor got = t.to(at::kFloat);
                  const std::string what =
                      str_cat(allreduce_algorithm_name(algorithm), " world ", world, " ", reduce_op_name(op), " ",
                              c10::toString(dtype), " count ", count, " rank ", group.rank());
                  for (int r = 0; r < world; ++r)
                    ASSERT_TRUE(std::isnan(got[r].item<float>())) << what << " element " << r;
                  ASSERT_EQ(got[count - 1].item<float>(), op == ReduceOp::kMin ? 1.0f : float(world)) << what;
                }
              }
            }
          },
          milliseconds(30000), options);
    }
  }
}

TEST(AllreduceAlgorithm, AutoChoosesDirectWhileLatencyDominates) {
  using A = AllreduceAlgorithm;
  EXPECT_EQ(choose_allreduce_algorithm(A::kAuto, 4, 2), A::kDirect);
  EXPECT_EQ(choose_allreduce_algorithm(A::kAuto, kDirectMaxBytesTwoRanks - 1, 2), A::kDirect);
  EXPECT_EQ(choose_allreduce_algorithm(A::kAuto, kDirectMaxBytesTwoRanks, 2), A::kRing);
  EXPECT_EQ(choose_allreduce_algorithm(A::kDirect, kDirectMaxBytesTwoRanks * 4, 2), A::kDirect);  // forced
  EXPECT_EQ(choose_allreduce_algorithm(A::kAuto, kDirectMaxFanoutBytes / 3, 4), A::kDirect);
  EXPECT_EQ(choose_allreduce_algorithm(A::kAuto, kDirectMaxFanoutBytes / 3 + 1, 4), A::kRing);
  EXPECT_EQ(choose_allreduce_algorithm(A::kRing, 4, 2), A::kRing);
  EXPECT_EQ(choose_allreduce_algorithm(A::kBcube, 1 << 30, 8), A::kBcube);
  EXPECT_EQ(parse_allreduce_algorithm("direct", "X"), A::kDirect);
  EXPECT_EQ(parse_allreduce_algorithm(allreduce_algorithm_name(A::kBcube), "X"), A::kBcube);
  EXPECT_EQ(parse_allreduce_algorithm("", "X"), A::kAuto);
  try {
    parse_allreduce_algorithm("tree", "RINGTORCH_ALLREDUCE_ALGORITHM");
    FAIL() << "accepted an unknown algorithm";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("RINGTORCH_ALLREDUCE_ALGORITHM=tree: use auto, direct, ring or bcube"),
              std::string::npos)
        << e.what();
  }
}

// The largest count of the sweep, 1 << 20 elements, kept to sum and max (every dtype) so that
// 8 ranks on 2 cores stay within seconds; the ring (large) and direct (2 ranks) both run.
TEST(ProcessGroup, AllreduceOfAMillionElementsInEveryDtype) {
  constexpr int64_t kCount = 1 << 20;
  for (int world : {2, 8}) {
    on_ranks(world, [&](ProcessGroup& group) {
      for (auto op : {ReduceOp::kSum, ReduceOp::kMax}) {
        for (auto dtype : kDtypes) {
          at::Tensor t = input_for(group.rank(), kCount, dtype);
          group.allreduce(t, op);
          ASSERT_TRUE(at::equal(t, expected_for(op, world, kCount, dtype)))
              << "world " << world << " " << reduce_op_name(op) << " " << c10::toString(dtype);
        }
      }
    });
  }
}

// Between 2 ranks, direct all-reduce sends buffers of 2 MiB and more in 1 MiB pieces, reducing
// each as it arrives (Note [Pipelined direct all-reduce]; forced, so that no run takes shared
// memory): a last piece shorter than the others, every element size (pieces end on whole
// elements), and nothing at all.
TEST(ProcessGroup, TwoRankAllreduceInPiecesEqualsTheWholeReduction) {
  for (auto algorithm : {AllreduceAlgorithm::kDirect}) {
    ProcessGroupOptions options;
    options.allreduce_algorithm = algorithm;
    on_ranks(
        2,
        [&](ProcessGroup& group) {
          for (auto dtype : {at::kByte, at::kHalf, at::kFloat, at::kDouble}) {
            for (int64_t count : {int64_t{0}, (int64_t{3} << 20) / static_cast<int64_t>(at::elementSize(dtype)) + 3}) {
              for (auto op : {ReduceOp::kSum, ReduceOp::kMax}) {
                at::Tensor t = input_for(group.rank(), count, dtype);
                group.allreduce(t, op);
                ASSERT_TRUE(at::equal(t, expected_for(op, 2, count, dtype)))
                    << allreduce_algorithm_name(algorithm) << " " << c10::toString(dtype) << " count " << count;
              }
            }
          }
        },
        milliseconds(30000), options);
  }
}

TEST(ProcessGroup, BroadcastFromEveryRoot) {
  for (int world : {1, 2, 3, 5}) {
    on_ranks(world, [&](ProcessGroup& group) {
      for (int root = 0; root < world; ++root) {
        for (auto dtype : kDtypes) {
          for (int64_t count : {0, 1, 1000}) {
            at::Tensor t = group.rank() == root ? at::arange(count).to(dtype) : at::zeros({count}, dtype);
            group.broadcast(t, root);
            ASSERT_TRUE(at::equal(t, at::arange(count).to(dtype))) << "root " << root;
          }
        }
      }
    });
  }
}

TEST(ProcessGroup, AllgatherPlacesEachRanksBlock) {
  for (int world : {1, 2, 4}) {
    on_ranks(world, [&](ProcessGroup& group) {
      for (int64_t count : {0, 1, 7, 1000}) {
        at::Tensor in = at::full({count}, group.rank(), at::kInt);
        at::Tensor out = at::empty({count * world}, at::kInt);
        group.allgather(in, out);
        for (int r = 0; r < world; ++r) {
          ASSERT_TRUE(at::equal(out.slice(0, r * count, (r + 1) * count), at::full({count}, r, at::kInt)));
        }
      }
    });
  }
}

TEST(ProcessGroup, ReduceToEveryRoot) {
  for (int world : {1, 2, 3, 4}) {
    on_ranks(world, [&](ProcessGroup& group) {
      for (int root = 0; root < world; ++root) {
        for (auto op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
          for (auto dtype : {at::kFloat, at::kBFloat16, at::kLong, at::kByte}) {
            if (op == ReduceOp::kAvg && !at::isFloatingType(dtype)) continue;
            at::Tensor t = input_for(group.rank(), 1000, dtype);
            group.reduce(t, root, op);
            if (group.rank() == root) {
              ASSERT_TRUE(at::equal(t, expected_for(op, world, 1000, dtype)))
                  << "world " << world << " root " << root << " " << reduce_op_name(op);
            }
          }
        }
      }
    });
  }
}

TEST(ProcessGroup, GatherAndScatterThroughEveryRoot) {
  for (int world : {1, 2, 3, 5}) {
    on_ranks(world, [&](ProcessGroup& group) {
      for (int root = 0; root < world; ++root) {
        for (int64_t count : {0, 1, 7, 1000}) {
          const bool is_root = group.rank() == root;
          at::Tensor mine = at::full({count}, group.rank() * 10 + root, at::kInt);
          at::Tensor all = is_root ? at::empty({count * world}, at::kInt) : at::Tensor();
          group.gather(mine, all, root);
          at::Tensor expected = at::empty({count * world}, at::kInt);
          for (int r = 0; r < world; ++r) expected.narrow(0, r * count, count).fill_(r * 10 + root);
          if (is_root) {
            ASSERT_TRUE(at::equal(all, expected)) << "gather, root " << root << " count " << count;
          }

          at::Tensor source = is_root ? expected : at::Tensor();
          at::Tensor got = at::empty({count}, at::kInt);
          group.scatter(source, got, root);
          ASSERT_TRUE(at::equal(got, at::full({count}, group.rank() * 10 + root, at::kInt))) << "scatter";
        }
      }
    });
  }
}

TEST(ProcessGroup, ReduceScatterGivesEachRankItsReducedBlock) {
  for (int world : {1, 2, 3, 4}) {
    on_ranks(world, [&](ProcessGroup& group) {
      for (auto op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
        for (int64_t count : {0, 1, 7, 1000}) {
          at::Tensor input = input_for(group.rank(), count * world, at::kDouble);
          at::Tensor before = input.clone();
          at::Tensor output = at::empty({count}, at::kDouble);
          group.reduce_scatter(input, output, op);
          at::Tensor want = expected_for(op, world, count * world, at::kDouble).narrow(0, group.rank() * count, count);
          ASSERT_TRUE(at::equal(output, want)) << "world " << world << " " << reduce_op_name(op) << " count " << count;
          ASSERT_TRUE(at::equal(input, before)) << "the input must stay untouched";
        }
      }
    });
  }
}

TEST(ProcessGroup, AlltoallTransposesBlocks) {
  for (int world : {1, 2, 3, 4}) {
    on_ranks(world, [&](ProcessGroup& group) {
      for (int64_t block : {0, 1, 5}) {
        // Block j of rank r's input holds 100 r + j; block r of rank j's output must hold it.
        at::Tensor input = at::empty({block * world}, at::kLong);
        for (int j = 0; j < world; ++j) input.narrow(0, j * block, block).fill_(100 * group.rank() + j);
        at::Tensor output = at::empty({block * world}, at::kLong);
        group.alltoall(input, output);
        for (int r = 0; r < world; ++r) {
          ASSERT_TRUE(
              at::equal(output.narrow(0, r * block, block), at::full({block}, 100 * r + group.rank(), at::kLong)));
        }
      }
    });
  }
}

TEST(ProcessGroup, SendAndRecvInBothDirectionsAtOnce) {
  on_ranks(3, [&](ProcessGroup& group) {
    const int next = (group.rank() + 1) % 3, prev = (group.rank() + 2) % 3;
    // Everyone sends to the next rank and receives from the previous one, with two tags, all
    // outstanding at once: a single ordered queue would deadlock here.
    at::Tensor out_a = at::full({1000}, group.rank(), at::kFloat), out_b = at::full({3}, -group.rank(), at::kFloat);
    at::Tensor in_a = at::empty({1000}, at::kFloat), in_b = at::empty({3}, at::kFloat);
    auto s1 = group.send_async(out_a, next, 1);
    auto s2 = group.send_async(out_b, next, 2);
    auto r2 = group.recv_async(in_b, prev, 2);
    auto r1 = group.recv_async(in_a, prev, 1);
    for (auto& w : {s1, s2, r1, r2}) w->wait();
    EXPECT_TRUE(at::equal(in_a, at::full({1000}, prev, at::kFloat)));
    EXPECT_TRUE(at::equal(in_b, at::full({3}, -prev, at::kFloat)));
    group.barrier();  // collectives still line up after point-to-point traffic
  });
}

// Before: Gloo aborted the receiving process (std::terminate) for a send longer than its recv,
// and completed a recv of a shorter or differently typed send silently (Note [Point-to-point
// header]). Now both ranks name both calls, and the group and the tag go on working.
TEST(ProcessGroup, MismatchedSendAndRecvAreNamedOnBothRanks) {
  struct Case {
    at::Tensor sent, received;
    std::string on_sender, on_receiver;
  };
  const std::vector<Case> cases = {
      {at::ones({8}), at::empty({4}), "this rank sent 8 float32 on tag 3, rank 1 receives 4 float32",
       "rank 0 sent 8 float32 on tag 3, this rank receives 4 float32"},
      {at::ones({4}), at::empty({8}), "this rank sent 4 float32 on tag 3, rank 1 receives 8 float32",
       "rank 0 sent 4 float32 on tag 3, this rank receives 8 float32"},
      {at::ones({4}, at::kInt), at::empty({16}, at::kByte), "this rank sent 4 int32 on tag 3, rank 1 receives 16 uint8",
       "rank 0 sent 4 int32 on tag 3, this rank receives 16 uint8"},
      {at::ones({100000}), at::empty({300000}), "this rank sent 100000 float32 on tag 3, rank 1 receives 300000",
       "rank 0 sent 100000 float32 on tag 3, this rank receives 300000"},
      {at::ones({300000}), at::empty({7}), "this rank sent 300000 float32 on tag 3, rank 1 receives 7",
       "rank 0 sent 300000 float32 on tag 3, this rank receives 7"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.on_receiver);
    std::vector<std::string> errors(2);
    on_ranks(2, [&](ProcessGroup& group) {
      try {
        if (group.rank() == 0) {
          group.send_async(c.sent, 1, 3)->wait();
        } else {
          group.recv_async(c.received, 0, 3)->wait();
        }
      } catch (const MismatchError& e) {
        errors[group.rank()] = e.what();
        EXPECT_EQ(e.site().peer, 1 - group.rank());
      }
      at::Tensor big = at::arange(300000, at::kFloat) * (group.rank() + 1);
      if (group.rank() == 0) {
        group.send_async(big, 1, 3)->wait();
      } else {
        group.recv_async(big, 0, 3)->wait();
        EXPECT_TRUE(at::equal(big, at::arange(300000, at::kFloat)));
      }
    });
    EXPECT_NE(errors[0].find(c.on_sender), std::string::npos) << errors[0];
    EXPECT_NE(errors[1].find(c.on_receiver), std::string::npos) << errors[1];
  }
}

// Two ranks exchanging large tensors, each waiting on its send before its recv: everything a
// wait needs is posted by the other side's send_async/recv_async, never by its wait().
TEST(ProcessGroup, AnExchangeWaitedSendFirstOnBothSidesCompletes) {
  on_ranks(2, [&](ProcessGroup& group) {
    const int peer = 1 - group.rank();
    for (int64_t count : {int64_t{10}, int64_t{300000}}) {
      at::Tensor out = at::full({count}, static_cast<float>(group.rank())), in = at::empty({count});
      auto sent = group.send_async(out, peer);
      auto received = group.recv_async(in, peer);
      sent->wait();
      received->wait();
      EXPECT_TRUE(at::equal(in, at::full({count}, static_cast<float>(peer))));
    }
  });
}

// Messages beyond the header's inline bytes travel on a slot numbered per message: receives of
// one tag waited in any order get their own message.
TEST(ProcessGroup, LargeMessagesOnOneTagArriveInOrderWhateverTheWaitOrder) {
  on_ranks(2, [&](ProcessGroup& group) {
    std::vector<at::Tensor> tensors;
    std::vector<std::shared_ptr<Work>> works;
    for (int i = 0; i < 3; ++i) {
      tensors.push_back(group.rank() == 0 ? at::full({200000}, static_cast<float>(i + 1)) : at::empty({200000}));
      works.push_back(group.rank() == 0 ? group.send_async(tensors[i], 1, 5) : group.recv_async(tensors[i], 0, 5));
    }
    for (int i = 2; i >= 0; --i) works[i]->wait();
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(at::equal(tensors[i], at::full({200000}, static_cast<float>(i + 1))));
  });
}

TEST(ProcessGroup, SubgroupsHaveTheirOwnContextAndRefuseOutsiders) {
  on_ranks(4, [&](ProcessGroup& group) {
    auto evens = group.new_group({0, 2});
    auto odds = group.new_group({1, 3});
    auto everyone = group.new_group({0, 1, 2, 3});
    auto& mine = group.rank() % 2 == 0 ? evens : odds;
    auto& other = group.rank() % 2 == 0 ? odds : evens;
    ASSERT_TRUE(mine->is_member());
    EXPECT_EQ(mine->size(), 2);
    EXPECT_EQ(mine->rank(), group.rank() / 2);
    at::Tensor t = at::full({10}, group.rank(), at::kLong);
    mine->allreduce(t);
    EXPECT_TRUE(at::equal(t, at::full({10}, group.rank() % 2 == 0 ? 0 + 2 : 1 + 3, at::kLong)));
    at::Tensor u = at::ones({3});
    everyone->allreduce(u);
    EXPECT_TRUE(at::equal(u, at::full({3}, 4.0f)));
    EXPECT_FALSE(other->is_member());
    try {
      other->allreduce(at::ones({1}));
      ADD_FAILURE() << "an outsider called into a subgroup";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("is not a member of group"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(group.rank() % 2 == 0 ? "(ranks 1, 3)" : "(ranks 0, 2)"), std::string::npos)
          << e.what();
    }
    // store(): one per group, shared by its members only; an outsider is refused.
    mine->store()->add("count", 1);
    group.store()->add("count", 1);
    group.barrier();
    EXPECT_EQ(mine->store()->add("count", 0), 2);
    EXPECT_EQ(group.store()->add("count", 0), 4);
    try {
      other->store();
      ADD_FAILURE() << "an outsider got a subgroup's store";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("store(): this rank is not a member of group"), std::string::npos)
          << e.what();
    }
    group.barrier();
  });
}

TEST(ProcessGroup, NewGroupRejectsBadRankLists) {
  on_ranks(2, [&](ProcessGroup& group) {
    EXPECT_THROW(group.new_group({1, 0}), InvalidArgumentError);
    EXPECT_THROW(group.new_group({0, 2}), InvalidArgumentError);
    EXPECT_THROW(group.new_group({}), InvalidArgumentError);
  });
}

// File descriptors and threads of this process, for leak checks.
int count_entries(const char* dir) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    (void)entry;
    ++n;
  }
  return n;
}

TEST(ProcessGroup, ThousandCreateDestroyCyclesLeakNothing) {
  auto store =
      c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", milliseconds(30000));
  auto cycle = [&](int i) {
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        ProcessGroupOptions options;
        options.name = "cycle" + std::to_string(i);
        auto group = ProcessGroup::create(store, r, 2, "127.0.0.1", options);
        at::Tensor t = at::ones({4});
        group->allreduce(t);
        group->shutdown();
      });
    }
    for (auto& t : threads) t.join();
  };
  cycle(-1);  // warm up lazily created state (Gloo's device loop, allocator caches)
  const int fds_before = count_entries("/proc/self/fd"), threads_before = count_entries("/proc/self/task");
  for (int i = 0; i < 1000; ++i) cycle(i);
  EXPECT_LE(count_entries("/proc/self/fd"), fds_before + 2) << "sockets leaked over 1000 cycles";
  EXPECT_LE(count_entries("/proc/self/task"), threads_before + 2) << "threads leaked over 1000 cycles";
}

// Every collective is checked before data moves (Note [Call fingerprint]; the shared-memory
// path compares in its segment): each rank's error names both calls, and the group stays usable.
// Before the fingerprint, over Gloo float32 against float64 aborted the process, int32 against
// uint8 of the same byte size gave wrong sums on both ranks, and other mismatches timed out.
TEST(ProcessGroup, MismatchedCallsAreNamedOnEveryRank) {
  struct Case {
    const char* name;
    std::function<void(ProcessGroup&, int)> call;
    const char* rank1_called;  // what rank 0's error must say rank 1 called
  };
  const std::vector<Case> cases = {
      {"counts", [](ProcessGroup& g, int r) { g.allreduce(at::ones({r == 0 ? 10 : 20})); },
       "rank 1 called allreduce of 20 float32 sum"},
      {"operations",
       [](ProcessGroup& g, int r) {
         if (r == 0) g.allreduce(at::ones({4}));
         if (r == 1) g.broadcast(at::ones({4}), 0);
       },
       "rank 1 called broadcast of 4 float32 (root 0)"},
      {"float32 against float64",
       [](ProcessGroup& g, int r) { g.allreduce(at::ones({4}, r == 0 ? at::kFloat : at::kDouble)); },
       "rank 1 called allreduce of 4 float64 sum"},
      {"int32 against uint8 of the same bytes",
       [](ProcessGroup& g, int r) { g.allreduce(r == 0 ? at::ones({4}, at::kInt) : at::ones({16}, at::kByte)); },
       "rank 1 called allreduce of 16 uint8 sum"},
      {"counts past the inline size", [](ProcessGroup& g, int r) { g.allreduce(at::ones({r == 0 ? 100000 : 100001})); },
       "rank 1 called allreduce of 100001 float32 sum"},
      {"barrier against allreduce",
       [](ProcessGroup& g, int r) {
         if (r == 0) g.barrier();
         if (r == 1) g.allreduce(at::ones({1}, at::kLong));
       },
       "rank 1 called allreduce of 1 int64 sum"},
      {"allgather block sizes",
       [](ProcessGroup& g, int r) {
         const int64_t n = r == 0 ? 3 : 5;
         g.allgather(at::ones({n}), at::empty({2 * n}));
       },
       "rank 1 called allgather of 5 float32"},
      {"allgatherv counts with the same total",
       [](ProcessGroup& g, int r) {
         const std::vector<int64_t> counts = r == 0 ? std::vector<int64_t>{1, 3} : std::vector<int64_t>{3, 1};
         g.allgatherv(at::ones({counts[r]}), at::empty({4}), counts);
       },
       "rank 1 called allgatherv of 4 float32 (per-rank counts #"},
      {"broadcast roots", [](ProcessGroup& g, int r) { g.broadcast(at::ones({4}), r); },
       "rank 1 called broadcast of 4 float32 (root 1)"},
  };
  auto store =
      c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", milliseconds(30000));
  std::vector<std::vector<std::string>> errors(2, std::vector<std::string>(cases.size()));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ProcessGroupOptions options;
      options.timeout = milliseconds(10000);
      auto group = ProcessGroup::create(store, r, 2, "127.0.0.1", options);
      for (size_t c = 0; c < cases.size(); ++c) {
        try {
          cases[c].call(*group, r);
          ADD_FAILURE() << "rank " << r << ": mismatched " << cases[c].name << " ran";
        } catch (const MismatchError& e) {
          errors[r][c] = e.what();
          EXPECT_EQ(e.site().rank, r);
          EXPECT_EQ(e.site().peer, 1 - r) << e.what();
        } catch (const std::exception& e) {
          ADD_FAILURE() << "rank " << r << ", " << cases[c].name << ": not a MismatchError: " << e.what();
        }
        at::Tensor t = at::ones({3});  // the group is still usable: no data moved on either side
        group->allreduce(t);
        EXPECT_TRUE(at::equal(t, at::full({3}, 2.0f))) << cases[c].name;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t c = 0; c < cases.size(); ++c) {
    EXPECT_NE(errors[0][c].find(cases[c].rank1_called), std::string::npos) << cases[c].name << ": " << errors[0][c];
    EXPECT_NE(errors[1][c].find("rank 0 called "), std::string::npos) << cases[c].name << ": " << errors[1][c];
    EXPECT_NE(errors[1][c].find("this rank called "), std::string::npos) << cases[c].name << ": " << errors[1][c];
  }
  EXPECT_NE(errors[0][0].find("[rank 0/2] allreduce #"), std::string::npos) << errors[0][0];
  std::printf("what rank 0 is told (docs/process_group.md quotes it):\n%s\n", errors[0][0].c_str());
}

// Ranks that force different all-reduce algorithms run the same call differently: named as such.
TEST(ProcessGroup, DifferentAllreduceAlgorithmsAreNamed) {
  auto store =
      c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", milliseconds(30000));
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ProcessGroupOptions options;
      options.timeout = milliseconds(10000);
      options.allreduce_algorithm = r == 0 ? AllreduceAlgorithm::kDirect : AllreduceAlgorithm::kRing;
      auto group = ProcessGroup::create(store, r, 2, "127.0.0.1", options);
      try {
        group->allreduce(at::ones({8}));
      } catch (const MismatchError& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("different all-reduce algorithms"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("RINGTORCH_ALLREDUCE_ALGORITHM"), std::string::npos) << errors[r];
  }
  EXPECT_NE(errors[0].find("rank 1 called allreduce of 8 float32 sum (operation #0, ring)"), std::string::npos)
      << errors[0];
}

TEST(ProcessGroup, AllgathervWithUnequalSizes) {
  for (int world : {1, 2, 3, 4}) {
    on_ranks(world, [&](ProcessGroup& group) {
      // Rank r contributes r + 1 elements of value r (rank 0 once with none at all).
      for (bool with_empty : {false, true}) {
        std::vector<int64_t> counts;
        for (int r = 0; r < world; ++r) counts.push_back(with_empty && r == 0 ? 0 : r + 1);
        int64_t total = 0;
        for (auto c : counts) total += c;
        at::Tensor in = at::full({counts[group.rank()]}, group.rank(), at::kShort).to(at::kInt);
        at::Tensor out = at::empty({total}, at::kInt);
        group.allgatherv(in, out, counts);
        int64_t offset = 0;
        for (int r = 0; r < world; ++r) {
          ASSERT_TRUE(at::equal(out.narrow(0, offset, counts[r]), at::full({counts[r]}, r, at::kInt)));
          offset += counts[r];
        }
      }
    });
  }
}

TEST(ProcessGroup, RawBuffersAreUsedInPlace) {
  on_ranks(2, [&](ProcessGroup& group) {
    std::vector<double> values(100, group.rank() + 1.0);
    group.allreduce(values.data(), static_cast<int64_t>(values.size()), at::kDouble, ReduceOp::kSum);
    for (double v : values) ASSERT_EQ(v, 3.0);
    std::vector<int32_t> mine(3, group.rank()), all(6, -1);
    group.allgather(mine.data(), all.data(), 3, at::kInt);
    EXPECT_EQ(all, (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
    std::vector<uint8_t> bytes(5, group.rank() == 1 ? 42 : 0);
    group.broadcast(bytes.data(), 5, at::kByte, 1);
    EXPECT_EQ(bytes, std::vector<uint8_t>(5, 42));
  });
}

TEST(ProcessGroup, IbverbsWithoutADeviceIsAClearError) {
  auto store = c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", milliseconds(5000));
  ProcessGroupOptions options;
  options.transport = "ibverbs";
  try {
    ProcessGroup::create(store, 0, 1, "127.0.0.1", options);
    GTEST_SKIP() << "this machine has an InfiniBand/RoCE device: the group was created over ibverbs";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("RINGTORCH_TRANSPORT=tcp"), std::string::npos) << e.what();
  }
  options.transport = "carrier-pigeon";
  EXPECT_THROW(ProcessGroup::create(store, 0, 1, "127.0.0.1", options), InvalidArgumentError);
}

TEST(ProcessGroup, AsyncWorkKeepsTensorsAliveAndRunsInOrder) {
  on_ranks(3, [&](ProcessGroup& group) {
    std::vector<std::shared_ptr<Work>> works;
    std::vector<at::Tensor> views;
    for (int i = 0; i < 20; ++i) {
      at::Tensor t = at::full({100}, i + group.rank(), at::kLong);
      views.push_back(t);
      works.push_back(group.allreduce_async(t));  // our reference could go: the Work holds one
    }
    works.push_back(group.barrier_async());
    for (auto& w : works) w->wait();
    for (int i = 0; i < 20; ++i) {
      EXPECT_TRUE(works[i]->is_completed());
      EXPECT_EQ(views[i][0].item<int64_t>(), 3 * i + 3);  // (i+0) + (i+1) + (i+2)
    }
  });
}

TEST(ProcessGroup, BadArgumentsAreRefusedBeforeAnythingIsQueued) {
  on_ranks(1, [&](ProcessGroup& group) {
    auto expect_invalid = [](const std::function<void()>& call, const std::string& fragment) {
      try {
        call();
        ADD_FAILURE() << "accepted; expected: " << fragment;
      } catch (const InvalidArgumentError& e) {
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      }
    };
    expect_invalid([&] { group.allreduce(at::ones({4, 4}).t()); }, "not contiguous");
    expect_invalid([&] { group.allreduce(at::ones({2}, at::kBool)); }, "is not carried");
    expect_invalid([&] { group.allreduce(at::ones({2}, at::kInt), ReduceOp::kAvg); }, "avg of int32");
    expect_invalid([&] { group.broadcast(at::ones({2}), 5); }, "root rank 5 is outside [0, 1)");
    expect_invalid([&] { group.allgather(at::ones({2}), at::ones({3})); }, "expected world size x input");
    expect_invalid([&] { group.allgather(at::ones({2}), at::ones({2}, at::kDouble)); },
                   "input is float32 but output is float64");
    expect_invalid([&] { group.reduce(at::ones({2}), -1); }, "reduce: root rank -1 is outside [0, 1)");
    expect_invalid([&] { group.gather(at::ones({2}), at::ones({3}), 0); }, "gather: output has 3 elements");
    expect_invalid([&] { group.scatter(at::ones({3}), at::ones({2}), 0); }, "scatter: input has 3 elements");
    expect_invalid([&] { group.reduce_scatter(at::ones({3}), at::ones({2})); }, "reduce_scatter: input has 3 elements");
    expect_invalid([&] { group.alltoall(at::ones({2}), at::ones({3})); }, "alltoall: input (2 float32)");
    expect_invalid([&] { group.send(at::ones({2}), 0); }, "send: peer rank 0 must be in [0, 1) and not this rank");
    expect_invalid([&] { group.allgatherv(at::ones({2}), at::ones({3}), {2}); }, "allgatherv: input has 2 float32");
    expect_invalid([&] { group.allgatherv(at::ones({2}), at::ones({2}), {1, 1}); }, "2 counts given for 1 ranks");
    group.allreduce(at::ones({2}));  // still usable
  });
}

TEST(ProcessGroup, ARankThatNeverCallsTimesOutAndBreaksTheGroup) {
  auto store =
      c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", milliseconds(30000));
  std::string first, second;
  FailureSite first_site;
  std::atomic<bool> rank0_done{false};
  std::thread rank1([&] {
    ProcessGroupOptions options;
    options.timeout = milliseconds(500);
    auto group = ProcessGroup::create(store, 1, 2, "127.0.0.1", options);
    while (!rank0_done) std::this_thread::sleep_for(milliseconds(10));  // never calls allreduce
  });
  {
    ProcessGroupOptions options;
    options.timeout = milliseconds(500);
    auto group = ProcessGroup::create(store, 0, 2, "127.0.0.1", options);
    auto start = std::chrono::steady_clock::now();
    try {
      group->allreduce(at::ones({1 << 20}));
    } catch (const Error& e) {
      first = e.what();
      first_site = e.site();
      EXPECT_TRUE(e.kind() == ErrorKind::kTimeout || e.kind() == ErrorKind::kPeerLost) << first;
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "hang guard";
    try {
      group->barrier();
    } catch (const Error& e) {
      second = e.what();
    }
    rank0_done = true;
  }
  rank1.join();
  // "direct" over TCP, "shared memory" on the same-host path: the same message otherwise.
  EXPECT_NE(first.find("[rank 0/2] allreduce #0 (group default, 4.0 MiB float32 sum, "), std::string::npos) << first;
  EXPECT_NE(first.find("peer rank 1"), std::string::npos) << first;
  EXPECT_NE(first.find("RINGTORCH_TIMEOUT"), std::string::npos) << first;
  EXPECT_EQ(first_site.rank, 0);
  EXPECT_EQ(first_site.peer, 1);
  EXPECT_EQ(first_site.operation.rfind("[rank 0/2] allreduce #0 (group default, 4.0 MiB float32 sum, ", 0), 0u)
      << first_site.operation;
  EXPECT_EQ(second, first) << "later calls fail at once with the original cause";
}

// shutdown() on another thread while a synchronous call runs on the caller's thread: the worker
// saw that call running and went back to sleep, so the call's end must wake it to stop.
TEST(ProcessGroup, ShutdownDuringASynchronousCallReturnsWhenTheCallEnds) {
  auto store =
      c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", milliseconds(30000));
  std::thread rank1([&] {
    auto group = ProcessGroup::create(store, 1, 2, "127.0.0.1");
    std::this_thread::sleep_for(milliseconds(500));  // rank 0's call waits for this one
    group->allreduce(at::ones({4}));
  });
  auto group = ProcessGroup::create(store, 0, 2, "127.0.0.1");
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(200));
    group->shutdown();  // hung here before the fix: the worker was never woken again
  });
  at::Tensor t = at::ones({4});
  group->allreduce(t);
  stopper.join();
  rank1.join();
  EXPECT_TRUE(t.eq(2.0f).all().item<bool>());
}

TEST(ProcessGroup, APerCallTimeoutOverridesTheGroups) {
  auto store =
      c10::make_intrusive<DeadlineStore>(c10::make_intrusive<c10d::HashStore>(), "memory", milliseconds(30000));
  std::atomic<bool> done{false};
  std::thread idle([&] {
    auto group = ProcessGroup::create(store, 1, 2, "127.0.0.1");  // never calls the collective
    while (!done) std::this_thread::sleep_for(milliseconds(10));
  });
  auto group = ProcessGroup::create(store, 0, 2, "127.0.0.1");  // group timeout: 300 s
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(group->barrier(milliseconds(300)), TimeoutError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << "the 300 s group timeout was used";
  done = true;
  idle.join();
}

}  // namespace
}  // namespace ringtorch
