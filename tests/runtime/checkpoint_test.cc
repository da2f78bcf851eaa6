// Checkpoints: round trip (model, optimizer, progress, RNG), keep-last, corrupt and incomplete
// files skipped, a writer killed mid-write, and the C++ -> Python -> C++ round trip; the
// in-memory commits of in-process elastic recovery (ElasticState).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <thread>

#include <ringtorch/checkpoint.h>
#include <ringtorch/elastic_state.h>
#include <ringtorch/error.h>
#include <ringtorch/state_broadcast.h>

#include "runtime/test_net.h"
#include "runtime/training/pickle_check.h"
#include "runtime/training/pickle_reader.h"
#include "support/error_of.h"
#include "support/stderr_capture.h"
#include "support/test_paths.h"
#include "support/thread_ranks.h"

namespace ringtorch {
namespace {

namespace fs = std::filesystem;

at::Tensor flat(torch::nn::Module& m) {
  std::vector<at::Tensor> parts;
  for (auto& p : m.parameters()) parts.push_back(p.detach().reshape({-1}));
  for (auto& b : m.buffers()) parts.push_back(b.detach().reshape({-1}));
  return torch::cat(parts);
}

void train_step(Net& net, torch::optim::Optimizer& opt) {
  opt.zero_grad();
  net->forward(torch::randn({4, 8})).pow(2).sum().backward();
  opt.step();
}

using testing::StderrCapture;

TEST(Checkpoint, RestoresModelOptimizerProgressAndRng) {
  testing::TempDir dir;
  Net net;
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  train_step(net, sgd);
  Checkpointer checkpoints(dir.path());
  TrainingProgress progress;
  progress.epoch = 3;
  progress.step = 120;
  progress.samples_in_epoch = 64;
  progress.metadata = {{"model", "net"}, {"world_size", "2"}};
  checkpoints.save(*net, &sgd, progress);
  const at::Tensor next_random = torch::rand({5});  // drawn right after the save

  Net restored;
  torch::optim::SGD restored_sgd(restored->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto loaded = checkpoints.load_latest(*restored, &restored_sgd);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->epoch, 3);
  EXPECT_EQ(loaded->step, 120);
  EXPECT_EQ(loaded->samples_in_epoch, 64);
  EXPECT_EQ(loaded->metadata, progress.metadata);
  EXPECT_TRUE(at::equal(torch::rand({5}), next_random)) << "the RNG state was not restored";
  EXPECT_TRUE(at::equal(flat(*restored), flat(*net)));
  ASSERT_EQ(checkpoints.list().size(), 1u);
  EXPECT_NE(checkpoints.list()[0].find("checkpoint-0000000120.pt"), std::string::npos);
  EXPECT_TRUE(fs::exists(checkpoints.list()[0] + ".crc32"));
}

// Divergence never rotates a good checkpoint out: a model holding NaN (or inf, in a buffer) is
// refused with the tensor's name, on rank 0 and, told by rank 0, on every other rank too; the
// finite checkpoint stays the newest.
TEST(Checkpoint, RefusesNonFiniteWeightsOnEveryRank) {
  testing::TempDir dir;
  testing::on_thread_ranks(2, [&](ProcessGroup& group) {
    Net net;
    torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
    Checkpointer checkpoints(dir.path());
    TrainingProgress progress;
    progress.step = 1;
    checkpoints.save(*net, &sgd, progress, &group);
    EXPECT_EQ(first_non_finite(*net), "");

    {
      torch::NoGradGuard no_grad;
      net->fc2->weight[1][2] = std::nan("");
    }
    EXPECT_EQ(first_non_finite(*net), "fc2.weight");
    progress.step = 2;
    try {
      checkpoints.save(*net, &sgd, progress, &group);
      ADD_FAILURE() << "rank " << group.rank() << ": a model holding NaN was saved";
    } catch (const InvalidArgumentError& e) {
      if (group.rank() == 0) {
        EXPECT_NE(std::string(e.what()).find("fc2.weight holds NaN or inf"), std::string::npos) << e.what();
      } else {
        EXPECT_NE(std::string(e.what()).find("rank 0 refused to write it"), std::string::npos) << e.what();
        EXPECT_EQ(e.site().peer, 0);
      }
    }
    {
      torch::NoGradGuard no_grad;
      net->fc2->weight[1][2] = 0.0;
      net->named_buffers()["steps"].fill_(std::numeric_limits<float>::infinity());
    }
    EXPECT_EQ(first_non_finite(*net), "steps");
    group.barrier();
    if (group.rank() == 0) {
      ASSERT_EQ(checkpoints.list().size(), 1u);
      EXPECT_NE(checkpoints.list()[0].find("checkpoint-0000000001.pt"), std::string::npos);
    }
  });
}

// A save killed between creating its temporary file and renaming it leaves ".NAME.tmp.PID.N";
// the next Checkpointer removes those of dead writers (ten minutes old), never a live writer's.
TEST(Checkpoint, RemovesTheTemporaryFilesOfDeadWriters) {
  testing::TempDir dir;
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);  // its pid now names no process
  int written = 0;
  auto make = [&](pid_t pid, int minutes_old) {
    const std::string path =
        dir.path() + "/.checkpoint-0000000007.pt.tmp." + std::to_string(pid) + "." + std::to_string(written++);
    std::ofstream(path) << "half a checkpoint";
    fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::minutes(minutes_old));
    return path;
  };
  const std::string dead = make(child, 15), live = make(::getpid(), 15), fresh = make(child, 0);
  Net net;
  Checkpointer checkpoints(dir.path());
  StderrCapture err;
  EXPECT_FALSE(checkpoints.load_latest(*net, nullptr).has_value());
  const std::string said = err.finish();
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live)) << "a running writer's file was removed";
  EXPECT_TRUE(fs::exists(fresh)) << "a file written to a moment ago was removed";
  EXPECT_NE(said.find("removed " + dead + ": the temporary file of a checkpoint write that did not finish"),
            std::string::npos)
      << said;
}

// broadcast_training_state: a checkpoint sent through the group. Rank 1 trained differently
// (other random batches, one more step); after the broadcast from rank 0 its weights, buffers and momentum
// are rank 0's, bit for bit, so the next step gives both ranks the same weights; so is the extra
// state when it is asked for.
TEST(StateBroadcast, GivesEveryRankTheRootsWeightsAndOptimizerState) {
  testing::on_thread_ranks(2, [](ProcessGroup& group) {
    Net net;
    torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    for (int i = 0; i <= group.rank(); ++i) train_step(net, sgd);
    net->named_buffers()["steps"].fill_(group.rank() + 1);
    const at::Tensor before = flat(*net);
    // Extra state comes along when asked for: the root's replaces the others'.
    std::map<std::string, at::Tensor> extra = {{"mine", at::full({3}, group.rank() + 1.0f)}};
    if (group.rank() == 1) extra["only_on_rank_1"] = at::zeros({1});
    broadcast_training_state(group, /*root=*/0, *net, &sgd, std::chrono::milliseconds(20000), &extra);
    ASSERT_EQ(extra.size(), 1u);
    EXPECT_TRUE(at::equal(extra.at("mine"), at::full({3}, 1.0f)));
    at::Tensor all = at::empty({2, before.numel()});
    group.allgather(flat(*net).contiguous(), all);
    EXPECT_TRUE(at::equal(all[0], all[1]));
    if (group.rank() == 0) {
      EXPECT_TRUE(at::equal(flat(*net), before));  // the root keeps its own
    }
    // The momentum came along: one more identical step keeps the ranks equal.
    sgd.zero_grad();
    net->forward(at::ones({4, 8})).pow(2).sum().backward();
    sgd.step();
    group.allgather(flat(*net).contiguous(), all);
    EXPECT_TRUE(at::equal(all[0], all[1]));
  });
}

// Four ranks after a recovery: rank 0 committed at step 5, ranks 1 and 2 at step 7 (different
// weights), rank 3 is new and committed nothing; all trained on past their commits. sync()
// gives every rank rank 1's commit (the newest, the lowest rank among equals), its progress
// and its momentum, and keeps it as every rank's commit.
TEST(ElasticState, SyncGivesEveryRankTheNewestCommitOfTheLowestRank) {
  testing::on_thread_ranks(4, [](ProcessGroup& group) {
    const int rank = group.rank();
    Net net;
    torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    ElasticState state;
    EXPECT_EQ(state.committed_step(), -1);
    for (int i = 0; i <= rank; ++i) train_step(net, sgd);
    at::Tensor committed;
    if (rank < 3) {
      TrainingProgress progress;
      progress.epoch = 1;
      progress.step = rank == 0 ? 5 : 7;
      progress.samples_in_epoch = 100 * rank;
      state.commit(*net, &sgd, progress);
      committed = flat(*net).clone();
      EXPECT_EQ(state.committed_step(), progress.step);
    }
    train_step(net, sgd);  // past the commit: redone after the recovery
    const std::optional<TrainingProgress> resumed = state.sync(group, *net, &sgd);
    ASSERT_TRUE(resumed.has_value());
    EXPECT_EQ(resumed->step, 7);
    EXPECT_EQ(resumed->samples_in_epoch, 100);
    EXPECT_EQ(state.last_source(), 1);
    EXPECT_EQ(state.committed_step(), 7);
    at::Tensor all = at::empty({4, flat(*net).numel()});
    group.allgather(flat(*net).contiguous(), all);
    for (int r = 1; r < 4; ++r) EXPECT_TRUE(at::equal(all[0], all[r])) << "rank " << r;
    if (rank == 1) {
      EXPECT_TRUE(at::equal(flat(*net), committed));
    }
    // The momentum came along: one more identical step keeps the ranks equal.
    sgd.zero_grad();
    net->forward(at::ones({4, 8})).pow(2).sum().backward();
    sgd.step();
    group.allgather(flat(*net).contiguous(), all);
    for (int r = 1; r < 4; ++r) EXPECT_TRUE(at::equal(all[0], all[r])) << "after a step, rank " << r;
  });
}

TEST(ElasticState, SyncWithoutAnyCommitLeavesEveryRankAsItWas) {
  testing::on_thread_ranks(2, [](ProcessGroup& group) {
    Net net;
    torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
    ElasticState state;
    const at::Tensor before = flat(*net).clone();
    EXPECT_FALSE(state.sync(group, *net, &sgd).has_value());
    EXPECT_EQ(state.last_source(), -1);
    EXPECT_EQ(state.committed_step(), -1);
    EXPECT_TRUE(at::equal(flat(*net), before));
  });
}

TEST(Checkpoint, NextStepAfterResumeMatchesUninterruptedTraining) {
  testing::TempDir dir;
  Checkpointer checkpoints(dir.path());
  torch::manual_seed(1);
  Net net;
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  train_step(net, sgd);
  checkpoints.save(*net, &sgd, TrainingProgress{0, 1, 0, {}, {}});
  train_step(net, sgd);  // the RNG continues from the saved state: the same batch as after resume
  Net resumed;
  torch::optim::SGD resumed_sgd(resumed->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  ASSERT_TRUE(checkpoints.load_latest(*resumed, &resumed_sgd).has_value());
  train_step(resumed, resumed_sgd);
  EXPECT_TRUE(at::equal(flat(*resumed), flat(*net))) << "momentum or RNG state lost";
}

// Every optimizer whose state a checkpoint keeps (optimizer_state.h): two steps, a checkpoint, a
// resume into a fresh model and optimizer, then one more step on both: bitwise equal.
TEST(Checkpoint, EveryOptimizerKindResumesExactly) {
  using Make = std::function<std::unique_ptr<torch::optim::Optimizer>(Net&)>;
  const std::vector<std::pair<std::string, Make>> kinds = {
      {"sgd",
       [](Net& n) {
         return std::make_unique<torch::optim::SGD>(n->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
       }},
      {"adam",
       [](Net& n) {
         return std::make_unique<torch::optim::Adam>(n->parameters(), torch::optim::AdamOptions(0.01).amsgrad(true));
       }},
      {"adamw",
       [](Net& n) { return std::make_unique<torch::optim::AdamW>(n->parameters(), torch::optim::AdamWOptions(0.01)); }},
      {"adagrad",
       [](Net& n) {
         return std::make_unique<torch::optim::Adagrad>(n->parameters(), torch::optim::AdagradOptions(0.1));
       }},
      {"rmsprop",
       [](Net& n) {
         return std::make_unique<torch::optim::RMSprop>(
             n->parameters(), torch::optim::RMSpropOptions(0.01).momentum(0.5).centered(true));
       }},
  };
  for (const auto& [kind, make] : kinds) {
    SCOPED_TRACE(kind);
    testing::TempDir dir;
    Checkpointer checkpoints(dir.path());
    torch::manual_seed(3);
    Net net;
    auto optimizer = make(net);
    train_step(net, *optimizer);
    train_step(net, *optimizer);
    checkpoints.save(*net, optimizer.get(), TrainingProgress{0, 2, 0, {}, {}});
    train_step(net, *optimizer);
    Net resumed;
    auto resumed_optimizer = make(resumed);
    ASSERT_TRUE(checkpoints.load_latest(*resumed, resumed_optimizer.get()).has_value());
    train_step(resumed, *resumed_optimizer);
    EXPECT_TRUE(at::equal(flat(*resumed), flat(*net))) << kind << "'s state was not restored exactly";
  }
}

TEST(Checkpoint, AnotherOptimizersStateIsAClearError) {
  testing::TempDir dir;
  Checkpointer checkpoints(dir.path());
  Net net;
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(0.01));
  train_step(net, adam);
  checkpoints.save(*net, &adam, TrainingProgress{0, 1, 0, {}, {}});
  Net other;
  torch::optim::SGD sgd(other->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  try {
    checkpoints.load_latest(*other, &sgd);
    FAIL() << "loaded Adam's state into SGD";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("the optimizer state is adam's, the optimizer is sgd"), std::string::npos)
        << e.what();
  }
}

TEST(Checkpoint, KeepsTheLastKAndSkipsCorruptOrIncompleteOnes) {
  testing::TempDir dir;
  Checkpointer checkpoints(dir.path(), /*keep_last=*/4);
  Net net;
  for (int64_t step = 1; step <= 6; ++step) {
    {
      torch::NoGradGuard no_grad;
      net->fc1->weight.fill_(static_cast<float>(step));
    }
    checkpoints.save(*net, nullptr, TrainingProgress{0, step, 0, {}, {}});
  }
  auto kept = checkpoints.list();
  ASSERT_EQ(kept.size(), 4u);
  EXPECT_NE(kept.front().find("checkpoint-0000000003.pt"), std::string::npos);
  // Truncate the newest (a torn write on a file system without rename atomicity), flip a byte
  // in the next (bit rot), drop the sidecar of the one before (a writer killed between renames:
  // its data file is whole, and loads, said to be unverified).
  fs::resize_file(kept[3], fs::file_size(kept[3]) / 2);
  {
    std::fstream f(kept[2], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(kept[2]) / 2));
    f.put('\x5a');
  }
  fs::remove(kept[1] + ".crc32");
  Net restored;
  StderrCapture warnings;
  auto loaded = checkpoints.load_latest(*restored, nullptr);
  const std::string text = warnings.finish();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 4);
  EXPECT_EQ(restored->fc1->weight[0][0].item<float>(), 4.0f);
  EXPECT_NE(text.find("skipping checkpoint " + kept[3] + ": it has "), std::string::npos) << text;
  EXPECT_NE(text.find("skipping checkpoint " + kept[2] + ": crc32 "), std::string::npos) << text;
  EXPECT_NE(text.find("checkpoint " + kept[1] + " has no checksum file"), std::string::npos) << text;
  EXPECT_NE(text.find("its bytes unverified"), std::string::npos) << text;
}

TEST(Checkpoint, AWriterKilledMidWriteLeavesTheLastCompleteOneUsable) {
  testing::TempDir dir;
  // A child process writes 16 MiB checkpoints in a loop (each with every weight equal to its
  // step) until it is killed at an arbitrary moment.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    torch::nn::Linear big(2048, 2048);
    Checkpointer writer(dir.path(), 2);
    for (int64_t step = 1;; ++step) {
      {
        torch::NoGradGuard no_grad;
        big->weight.fill_(static_cast<float>(step));
        big->bias.fill_(static_cast<float>(step));
      }
      writer.save(*big, nullptr, TrainingProgress{0, step, 0, {}, {}});
    }
  }
  Checkpointer reader(dir.path(), 2);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (reader.list().size() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(137));  // somewhere inside a write
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  torch::nn::Linear big(2048, 2048);
  auto loaded = reader.load_latest(*big, nullptr);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_GE(loaded->step, 2);
  EXPECT_TRUE(at::equal(big->weight, at::full_like(big->weight, static_cast<float>(loaded->step))));
  EXPECT_TRUE(at::equal(big->bias, at::full_like(big->bias, static_cast<float>(loaded->step))));
}

TEST(Checkpoint, PythonReadsItAndWritesOneBack) {
  if (!fs::exists("/usr/bin/python3") || std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0) {
    GTEST_SKIP() << "Debian's python3-torch is not installed";
  }
  testing::TempDir dir;
  Checkpointer checkpoints(dir.path());
  Net net;
  TrainingProgress progress{2, 40, 0, {{"model", "net"}}, {}};
  const std::string path = checkpoints.save(*net, nullptr, progress);
  const std::string back = dir.file("from_python.pt");
  const std::string command =
      "/usr/bin/python3 " RINGTORCH_SOURCE_DIR "/tests/runtime/checkpoint_interop.py " + path + " " + back;
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  Net reloaded;
  TrainingProgress from_python = load_checkpoint_file(back, *reloaded, nullptr);
  EXPECT_EQ(from_python.epoch, 3);
  EXPECT_EQ(from_python.step, 41);
  EXPECT_EQ(from_python.metadata.at("written_by"), "python");
  auto a = net->named_parameters(), b = reloaded->named_parameters();
  for (auto& item : a) {
    EXPECT_TRUE(at::allclose(b[item.key()], item.value() + 1)) << item.key();
  }
}

TEST(Checkpoint, RankZeroWritesAndEveryRankResumes) {
  testing::TempDir dir;
  testing::on_thread_ranks(2, [&](ProcessGroup& group) {
    Net net;
    Checkpointer checkpoints(dir.path());
    {
      torch::NoGradGuard no_grad;
      net->fc2->bias.fill_(static_cast<float>(group.rank()));  // only rank 0's may land on disk
    }
    checkpoints.save(*net, nullptr, TrainingProgress{1, 7, 0, {}, {}}, &group);
    // After the barrier the file exists for every rank.
    ASSERT_EQ(checkpoints.list().size(), 1u);
    Net resumed;
    auto loaded = checkpoints.load_latest(*resumed, nullptr);
    ASSERT_TRUE(loaded.has_value());
    EXPECT_EQ(loaded->step, 7);
    EXPECT_TRUE(at::equal(resumed->fc2->bias, at::zeros_like(resumed->fc2->bias)));
  });
}

TEST(Checkpoint, AnotherModelsCheckpointIsAClearError) {
  testing::TempDir dir;
  Checkpointer checkpoints(dir.path());
  torch::nn::Linear other(3, 3);
  checkpoints.save(*other, nullptr, TrainingProgress{});
  Net net;
  try {
    checkpoints.load_latest(*net, nullptr);
    FAIL() << "loaded another model's checkpoint";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit the model; missing 'fc1.weight'"), std::string::npos)
        << e.what();
  }
}

// Rewrites `path` as the same checkpoint with its entry `key` replaced by `value` (or removed,
// for None), with a matching checksum file: damage that the checksum cannot see (it was
// written that way).
void replace_entry(const std::string& path, const std::string& key, const c10::IValue& value) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto dict = torch::pickle_load(bytes).toGenericDict();
  if (value.isNone()) {
    (void)dict.erase(key);
  } else {
    dict.insert_or_assign(key, value);
  }
  const std::vector<char> out = torch::pickle_save(dict);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(out.data(), static_cast<std::streamsize>(out.size()));
  const uLong crc =
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(out.data()), static_cast<uInt>(out.size()));
  std::ofstream(path + ".crc32", std::ios::trunc) << std::hex << crc << std::dec << " " << out.size() << "\n";
}

// A model after one SGD step with momentum, and its checkpoint (step 1) in a fresh directory.
struct SavedCheckpoint {
  testing::TempDir dir;
  Checkpointer checkpoints{dir.path()};
  Net trained;
  torch::optim::SGD sgd{trained->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9)};
  std::string path;
  SavedCheckpoint() {
    train_step(trained, sgd);
    path = checkpoints.save(*trained, &sgd, TrainingProgress{0, 1, 0, {}, {}});
  }
};

// Before: the weights of a checkpoint whose optimizer state could not be loaded were already in
// the model when it was skipped, so the "fresh" start began from them, and nothing said that no
// checkpoint had been loaded; LibTorch's stack trace filled the warning.
TEST(Checkpoint, ADamagedOptimizerStateLeavesTheModelAsItWas) {
  SavedCheckpoint saved;
  replace_entry(saved.path, "optimizer_state", std::string("not an optimizer state"));
  Net fresh;
  const at::Tensor before = flat(*fresh).clone();
  torch::optim::SGD fresh_sgd(fresh->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  StderrCapture warnings;
  // Its only checkpoint could not be loaded: the resume fails (it does not start over quietly).
  const std::string error = testing::error_of<IoError>([&] { saved.checkpoints.load_latest(*fresh, &fresh_sgd); });
  const std::string text = warnings.finish();
  EXPECT_NE(error.find("none of the 1 checkpoints in " + saved.dir.path() + " could be loaded"), std::string::npos)
      << error;
  EXPECT_TRUE(at::equal(flat(*fresh), before)) << "the skipped checkpoint's weights stayed in the model";
  EXPECT_FALSE(at::equal(flat(*fresh), flat(*saved.trained)));
  EXPECT_NE(text.find("skipping checkpoint " + saved.path + ": "), std::string::npos) << text;
  EXPECT_EQ(text.find("frame #"), std::string::npos) << "a stack trace inside the warning: " << text;
  train_step(fresh, fresh_sgd);  // the optimizer is still usable
}

// Format 1 kept LibTorch's optimizer archive (a TorchScript module) as bytes; loading it compiles
// the code in the file, which crashed on damaged code (tests/fuzz). Its weights still load.
TEST(Checkpoint, AFormatOneCheckpointLoadsItsWeightsAndSaysTheOptimizerStartsFresh) {
  SavedCheckpoint saved;
  replace_entry(saved.path, "optimizer_state", c10::IValue());
  replace_entry(saved.path, "optimizer", at::zeros({16}, at::kByte));
  Net fresh;
  torch::optim::SGD fresh_sgd(fresh->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  StderrCapture warnings;
  ASSERT_TRUE(saved.checkpoints.load_latest(*fresh, &fresh_sgd).has_value());
  const std::string text = warnings.finish();
  EXPECT_TRUE(at::equal(flat(*fresh), flat(*saved.trained)));
  EXPECT_TRUE(fresh_sgd.state().empty());
  EXPECT_NE(text.find("(format 1), which is no longer loaded"), std::string::npos) << text;
}

// The pickle reader checks as it reads: LibTorch's unpickler zero-filled a string of whatever
// length a pickle claimed (the checkpoint fuzzer's input touched 4 GiB), grew its memo to any
// index, and popped an empty stack (a TUPLE3 on a stack of one freed a pointer it never
// allocated). Each damaged pickle is an IoError naming the byte and what is wrong.
TEST(Checkpoint, ADamagedPickleIsAnErrorNamingTheByte) {
  const StorageLoader no_storages = [](const std::string& key, at::ScalarType) -> at::Tensor {
    throw IoError("no storage " + key);
  };
  const std::vector<char> valid = torch::jit::pickle(c10::IValue(std::string("format")));
  EXPECT_EQ(read_pickle(valid.data(), valid.size(), no_storages, "p").toStringRef(), "format");
  const struct {
    std::string bytes, expected;
  } bad[] = {
      {std::string("\x80\x02X\xff\xff\xff\xff"
                   "ab.",
                   10),
       "at byte 2: it claims 4294967295 bytes, 3 are left"},
      {std::string("\x80\x02\xff.", 4), "at byte 2: byte 0xff is no pickle opcode"},
      {std::string("\x80\x02N", 3), "at byte 3: it ends before its STOP opcode"},
      {std::string("\x80\x02Nj\x00\x00\x00\x40.", 9), "at byte 3: it names memo entry 1073741824, which was never"},
      {std::string("\x80\x02Ng99999\n.", 12), "at byte 3: it names memo entry 99999, which was never stored"},
      {std::string("\x80\x02"
                   "cbuiltins\nlist",
                   16),
       "its argument has no end of line"},
      {std::string("\x80\x02"
                   "ctorch.jit._pickle\nrestore_type_tag\nq\x00\x87.",
                   42),
       "at byte 40: it takes an item the stack does not hold"},
      {std::string("\x80\x02NN(N\x86.", 8), "at byte 6: it takes an item the stack does not hold"},
      {std::string("\x80\x02}NNNu.", 8), "at byte 6: it needs a MARK and there is none"},
      {std::string("\x80\x02}(NNNu.", 9), "at byte 7: it pairs keys with values and there are 3 items"},
      {std::string("\x80\x02(NNNd.", 8), "at byte 6: it pairs keys with values and there are 3 items"},
      {std::string("\x80\x02q\x00N.", 6), "at byte 2: it takes an item the stack does not hold"},
      {std::string("\x80\x02.", 3), "at byte 2: it takes an item the stack does not hold"},
      // A list placed in itself, and a list changed after it was placed in another (which could
      // then be placed in it): cycles of references, never freed.
      {std::string("\x80\x02]q\x00h\x00"
                   "a.",
                   9),
       "at byte 7: it places a container in itself"},
      {std::string("\x80\x02]q\x00]q\x01"
                   "ah\x01h\x00"
                   "a.",
                   15),
       "at byte 13: it changes a container already placed in another"},
      {std::string("\x80\x02"
                   "cos\nsystem\n.",
                   14),
       "holds the global os.system at byte 2"},
      {std::string("\x80\x02\x8f.", 4), "holds a set at byte 2"},
      // Keys that make LibTorch's dict double its table at every insertion: NaN, large integers.
      {std::string("\x80\x02}G\x7f\xf8\x00\x00\x00\x00\x00\x00K\x01s.", 16), "holds a dict key of type Double"},
      {std::string("\x80\x02}\x8a\x05\x00\x00\x00\x00\x01K\x01s.", 14),
       "holds the dict key 4294967296 (integer keys are 0 to 2^31-1)"},
      {std::string("\x80\x01N.", 4), "holds pickle protocol 1 at byte 0"},
      {std::string("\x80\x02\x8a\x09\x01\x01\x01\x01\x01\x01\x01\x01\x01.", 14), "an integer of 9 bytes"},
  };
  for (const auto& b : bad) {
    try {
      read_pickle(b.bytes.data(), b.bytes.size(), no_storages, "p");
      ADD_FAILURE() << "accepted " << b.expected;
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(b.expected), std::string::npos) << e.what();
    }
  }
  // Nesting deeper than 100 (an IValue's destructor recurses through what it holds).
  std::string deep("\x80\x02", 2);
  for (int i = 0; i < 200; ++i) deep += "]";
  for (int i = 0; i < 199; ++i) deep += "a";
  deep += ".";
  try {
    read_pickle(deep.data(), deep.size(), no_storages, "p");
    ADD_FAILURE() << "accepted 200 nested lists";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("containers nested more than 100 deep"), std::string::npos) << e.what();
  }
}

// LibTorch's zip reader allocates what an entry claims before extracting it (the fuzzer's input
// asked for 4 GiB): entries may claim no more than the file holds.
TEST(Checkpoint, AZipEntryClaimingMoreThanTheFileHoldsIsRefused) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("weights", at::ones({64}));
  std::vector<char> bytes = torch::pickle_save(dict);
  EXPECT_NO_THROW(check_zip_entry_sizes(bytes.data(), bytes.size(), "p"));
  // The first central-directory entry's uncompressed size (offset 24), made huge.
  const std::string signature("PK\x01\x02", 4);
  const auto entry = std::search(bytes.begin(), bytes.end(), signature.begin(), signature.end());
  ASSERT_NE(entry, bytes.end());
  const uint32_t huge = 0xFFFFFF00u;
  std::memcpy(&*entry + 24, &huge, sizeof(huge));
  try {
    check_zip_entry_sizes(bytes.data(), bytes.size(), "p");
    FAIL() << "accepted an entry of 4 GiB";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("claims 4294967040 bytes in a file of " + std::to_string(bytes.size())),
              std::string::npos)
        << e.what();
  }
}

// LibTorch 1.13's unpickler builds a tensor from the file's sizes and strides without checking
// them against its storage (Python's torch.load does): a fuzzed rng_state made set_state read
// past the storage (SEGV). Every tensor a checkpoint restores is checked first.
TEST(Checkpoint, ATensorReachingPastItsStorageIsRefused) {
  at::Tensor fits = at::zeros({4, 3});
  EXPECT_NO_THROW(check_tensor_within_storage(fits, "t"));
  EXPECT_NO_THROW(check_tensor_within_storage(fits.t(), "t"));
  EXPECT_NO_THROW(check_tensor_within_storage(fits.narrow(0, 3, 1), "t"));
  at::Tensor past = at::zeros({4});
  past.unsafeGetTensorImpl()->set_sizes_contiguous({100});  // what a damaged pickle can say
  try {
    check_tensor_within_storage(past, "its 'rng_state'");
    FAIL() << "accepted a tensor past its storage";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("its 'rng_state' is not a dense tensor within its storage (it reaches byte "
                                         "400 of a storage of 16)"),
              std::string::npos)
        << e.what();
  }
}

// A checkpoint without its checksum file (its writer stopped between the two renames) whose
// bytes are damaged is skipped like any other, and when it is the only one the resume fails:
// there was work here, and starting over would hide it.
TEST(Checkpoint, ADamagedCheckpointWithoutChecksumIsNotAFreshStart) {
  testing::TempDir dir;
  Checkpointer checkpoints(dir.path());
  Net net;
  const std::string path = checkpoints.save(*net, nullptr, TrainingProgress{0, 1, 0, {}, {}});
  fs::remove(path + ".crc32");
  fs::resize_file(path, fs::file_size(path) / 2);
  StderrCapture warnings;
  EXPECT_THROW(checkpoints.load_latest(*net, nullptr), IoError);
  const std::string text = warnings.finish();
  EXPECT_NE(text.find("skipping checkpoint " + path + ": "), std::string::npos) << text;
  EXPECT_NE(text.find("(it has no checksum file)"), std::string::npos) << text;
}

// A save whose checksum file cannot be written (a full disk takes the small file after the big
// one; here a directory stands where the file would go) removes its data file: the directory
// holds no checkpoint of that step, and a resume takes the one before.
TEST(Checkpoint, ASaveWhoseChecksumFailsLeavesNoDataFile) {
  testing::TempDir dir;
  Checkpointer checkpoints(dir.path());
  Net net;
  checkpoints.save(*net, nullptr, TrainingProgress{0, 1, 0, {}, {}});
  const std::string second = dir.file("checkpoint-0000000002.pt");
  fs::create_directory(second + ".crc32");
  EXPECT_THROW(checkpoints.save(*net, nullptr, TrainingProgress{0, 2, 0, {}, {}}), IoError);
  EXPECT_FALSE(fs::exists(second));
  fs::remove(second + ".crc32");
  auto loaded = checkpoints.load_latest(*net, nullptr);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 1);
}

// A training mode's own state (TrainingProgress::extra_state, PowerSGD's in ringtrain) comes
// back by name; a checkpoint without it gives none.
TEST(Checkpoint, ExtraStateComesBackByName) {
  testing::TempDir dir;
  Checkpointer checkpoints(dir.path());
  Net net;
  TrainingProgress progress{0, 1, 0, {}, {}};
  progress.extra_state["powersgd.step"] = at::full({1}, 12, at::kLong);
  progress.extra_state["powersgd.errors.0"] = at::arange(6, at::kFloat).view({2, 3});
  checkpoints.save(*net, nullptr, progress);
  auto loaded = checkpoints.load_latest(*net, nullptr);
  ASSERT_TRUE(loaded.has_value());
  ASSERT_EQ(loaded->extra_state.size(), 2u);
  EXPECT_EQ(loaded->extra_state.at("powersgd.step").item<int64_t>(), 12);
  EXPECT_TRUE(at::equal(loaded->extra_state.at("powersgd.errors.0"), progress.extra_state["powersgd.errors.0"]));
  checkpoints.save(*net, nullptr, TrainingProgress{0, 2, 0, {}, {}});
  EXPECT_TRUE(checkpoints.load_latest(*net, nullptr)->extra_state.empty());
}

// Retention counts checkpoints without a sidecar too (they load): they do not pile up.
TEST(Checkpoint, KeepLastCountsCheckpointsWithoutSidecar) {
  testing::TempDir dir;
  Checkpointer checkpoints(dir.path(), 2);
  Net net;
  const std::string first = checkpoints.save(*net, nullptr, TrainingProgress{0, 1, 0, {}, {}});
  fs::remove(first + ".crc32");
  checkpoints.save(*net, nullptr, TrainingProgress{0, 2, 0, {}, {}});
  checkpoints.save(*net, nullptr, TrainingProgress{0, 3, 0, {}, {}});
  EXPECT_FALSE(fs::exists(first));
  EXPECT_EQ(checkpoints.all_files().size(), 2u);
}

TEST(Checkpoint, AnUnreadableChecksumFileIsNamedAsSuch) {
  testing::TempDir dir;
  Checkpointer checkpoints(dir.path());
  Net net;
  const std::string path = checkpoints.save(*net, nullptr, TrainingProgress{0, 1, 0, {}, {}});
  for (const char* sidecar : {"", "garbage\n", "zz12 300\n", "1234abcd\n", "1234abcd 12 extra\n"}) {
    std::ofstream(path + ".crc32", std::ios::trunc) << sidecar;
    StderrCapture warnings;
    EXPECT_THROW(checkpoints.load_latest(*net, nullptr), IoError) << sidecar;
    const std::string text = warnings.finish();
    EXPECT_NE(text.find("checksum file " + path + ".crc32 cannot be read"), std::string::npos) << text;
    EXPECT_EQ(text.find("says 0"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace ringtorch
