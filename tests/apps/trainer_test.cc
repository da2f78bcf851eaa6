// The trainer's pieces that need no launcher: device selection (every rule, with pretend CUDA
// device counts: the GPU itself cannot be tested here), the progress display, keep_freed_memory
// (malloc settings), and train() with DataParallel inside each rank (two CPU "devices") matching
// one device per rank.
#include "apps/trainer/trainer.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ringtorch/checkpoint_format.h>
#include <ringtorch/error.h>
#include <ringtorch/keep_freed_memory.h>

#include "apps/trainer/device_selection.h"
#include "apps/trainer/grad_compression.h"
#include "apps/trainer/job_config.h"
#include "apps/trainer/progress.h"
#include "apps/trainer/rank_report.h"
#include "support/error_of.h"
#include "support/scoped_environment.h"
#include "support/test_paths.h"
#include "support/thread_ranks.h"

namespace ringtorch {
namespace {

// Every bad choice here is an InvalidArgumentError.
template <typename F>
std::string error_of(F f) {
  return testing::error_of<InvalidArgumentError>(f);
}

TEST(DeviceSelection, AutoTakesTheLocalRanksGpuOrFallsBackToCpuWithANote) {
  auto one = select_devices("auto", {}, 1, 2);
  EXPECT_EQ(one.describe(), "cuda:1");
  EXPECT_TRUE(one.note.empty());
  auto cpu = select_devices("auto", {}, 1, 0);
  EXPECT_EQ(cpu.describe(), "cpu");
  EXPECT_EQ(cpu.note, "no CUDA device visible: training on CPU");
  auto ignored = select_devices("auto", {0, 1}, 0, 0);
  EXPECT_EQ(ignored.describe(), "cpu");
  EXPECT_NE(ignored.note.find("--gpus 0,1 ignored"), std::string::npos);
  auto shared = select_devices("cuda", {}, 3, 2);
  EXPECT_EQ(shared.describe(), "cuda:1");
  EXPECT_NE(shared.note.find("ranks share GPUs"), std::string::npos);
}

TEST(DeviceSelection, ExplicitChoices) {
  EXPECT_EQ(select_devices("cpu", {}, 0, 4).describe(), "cpu");
  EXPECT_EQ(select_devices("cuda:2", {}, 0, 4).describe(), "cuda:2");
  EXPECT_EQ(select_devices("auto", {2, 0}, 1, 4).describe(), "cuda:2,cuda:0");
  EXPECT_EQ(parse_device_ids("0,1,3"), (std::vector<int>{0, 1, 3}));
}

TEST(DeviceSelection, BadChoicesNameTheFlag) {
  EXPECT_NE(error_of([] { select_devices("gpu", {}, 0, 1); }).find("--device gpu: use auto, cpu, cuda or cuda:N"),
            std::string::npos);
  EXPECT_NE(error_of([] { select_devices("cuda", {}, 0, 0); }).find("--device cuda: no CUDA device is visible"),
            std::string::npos);
  EXPECT_NE(error_of([] { select_devices("cuda:3", {}, 0, 2); }).find("cuda:3 does not exist; 2 CUDA device(s)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              select_devices("auto", {0, 5}, 0, 2);
            }).find("--gpus 0,5: cuda:5 does not exist"),
            std::string::npos);
  EXPECT_NE(error_of([] { select_devices("cpu", {0}, 0, 2); }).find("--gpus 0: needs --device cuda or auto"),
            std::string::npos);
  EXPECT_NE(error_of([] { select_devices("auto", {1, 1}, 0, 2); }).find("listed twice"), std::string::npos);
  EXPECT_NE(error_of([] { parse_device_ids("0,x"); }).find("--gpus"), std::string::npos);
  EXPECT_NE(error_of([] { parse_device_ids("0,"); }).find("--gpus"), std::string::npos);
}

std::string read_back(std::FILE* f) {
  std::rewind(f);
  std::string text;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), f)) text.append(buffer, n);
  return text;
}

TEST(Progress, BarRedrawsInPlaceAndEndsTheEpochWithANewline) {
  std::FILE* f = std::tmpfile();
  ProgressReporter bar(f, ProgressStyle::kBar, 100);
  bar.begin_epoch(0, 3, 1000);
  bar.update(500, 1, 0.75);
  bar.update(1000, 2, 0.5);  // the last batch is always drawn
  bar.end_epoch();
  const std::string text = read_back(f);
  EXPECT_NE(text.find("\repoch 1/3 [##########..........]  50%  500/1000"), std::string::npos) << text;
  EXPECT_NE(text.find("\repoch 1/3 [####################] 100%  1000/1000"), std::string::npos) << text;
  EXPECT_NE(text.find("loss 0.5000\033[K\n"), std::string::npos) << text;
  std::fclose(f);
}

TEST(Progress, LinesEveryLogIntervalAndAutoIsLinesOffATerminal) {
  std::FILE* f = std::tmpfile();
  EXPECT_EQ(parse_progress_style("auto", f), ProgressStyle::kLines);
  ProgressReporter lines(f, ProgressStyle::kLines, 2);
  lines.begin_epoch(1, 3, 600);
  for (int b = 1; b <= 5; ++b) lines.update(b * 100, b, 1.0 / b);
  lines.end_epoch();
  const std::string text = read_back(f);
  EXPECT_NE(text.find("  epoch 2: 200/600 samples, "), std::string::npos) << text;
  EXPECT_NE(text.find("  epoch 2: 400/600 samples, "), std::string::npos) << text;
  EXPECT_EQ(text.find("300/600"), std::string::npos) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  EXPECT_NE(error_of([&] { parse_progress_style("fancy", f); }).find("--progress fancy"), std::string::npos);
  std::fclose(f);
}

// With --local-steps the batch count moves a period at a time: a line each time it passes a
// multiple of the interval, none twice for one count; before this rank's first batch of the
// epoch (--balance dynamic: the others claimed the period's) the loss shows as "-".
TEST(Progress, LinesWhenTheCountPassesAMultipleAndADashBeforeAnyLoss) {
  std::FILE* f = std::tmpfile();
  ProgressReporter lines(f, ProgressStyle::kLines, 10);
  lines.begin_epoch(0, 1, 1000);
  lines.update(100, 0, std::nullopt);  // a period this rank trained nothing of
  lines.update(200, 16, 0.5);
  lines.update(300, 16, 0.5);  // another period without a batch of its own: the same count
  lines.update(400, 32, 0.25);
  lines.end_epoch();
  ProgressReporter bar(f, ProgressStyle::kBar, 10);
  bar.begin_epoch(0, 1, 1000);
  bar.update(100, 0, std::nullopt);
  bar.end_epoch();
  const std::string text = read_back(f);
  EXPECT_EQ(text.find("100/1000 samples"), std::string::npos) << text;
  EXPECT_NE(text.find("200/1000 samples, "), std::string::npos) << text;
  EXPECT_NE(text.find("loss 0.5000\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("300/1000 samples"), std::string::npos) << text;
  EXPECT_NE(text.find("400/1000 samples, "), std::string::npos) << text;
  EXPECT_NE(text.find("\repoch 1/1 [##..................]  10%  100/1000"), std::string::npos) << text;
  EXPECT_NE(text.find("loss -\033[K\n"), std::string::npos) << text;
  std::fclose(f);
}

// Page faults of a round that allocates three 12 MiB blocks, writes them and frees them.
long faults_of_a_round_of_large_blocks() {
  constexpr size_t kBlock = size_t{12} << 20;
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  void* blocks[3];
  for (void*& b : blocks) {
    b = std::malloc(kBlock);
    std::memset(b, 1, kBlock);
    asm volatile("" : : "r"(b) : "memory");  // the writes happen: no allocation elided
  }
  for (void* b : blocks) std::free(b);
  getrusage(RUSAGE_SELF, &after);
  return after.ru_minflt - before.ru_minflt;
}

// Every variable keep_freed_memory() reads, each with a value by which the user chooses their own
// malloc settings (the header's list, written out again here on purpose: the test states it).
constexpr std::pair<const char*, const char*> kUsersMallocChoices[] = {{"RINGTORCH_KEEP_FREED_MEMORY", "0"},
                                                                       {"GLIBC_TUNABLES", "glibc.malloc.arena_max=2"},
                                                                       {"MALLOC_TRIM_THRESHOLD_", "131072"},
                                                                       {"MALLOC_MMAP_THRESHOLD_", "131072"},
                                                                       {"MALLOC_TOP_PAD_", "0"},
                                                                       {"MALLOC_MMAP_MAX_", "65536"},
                                                                       {"MALLOC_ARENA_MAX", "2"}};

// Those variables, unset while a test runs and restored after it.
class MallocEnvironment {
 public:
  MallocEnvironment() {
    for (const auto& choice : kUsersMallocChoices) saved_.emplace_back(choice.first, std::nullopt);
  }

 private:
  std::deque<testing::ScopedEnvironment> saved_;  // a deque: its elements never move
};

// The sanitizers' allocators replace glibc's malloc (ASan's mallopt does nothing and says so).
bool sanitized_malloc() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#else
  return false;
#endif
}

TEST(KeepFreedMemory, TheUsersOwnMallocSettingsWin) {
  MallocEnvironment environment;
  for (const auto& [name, value] : kUsersMallocChoices) {
    testing::ScopedEnvironment chosen(name, value);
    EXPECT_FALSE(keep_freed_memory()) << name;
  }
}

// glibc's defaults give 3 x 12 MiB back to the kernel on every round (measured: 9184-9222 faults
// each round, 3072 pages per block); kept, the pages are faulted in once.
TEST(KeepFreedMemory, LaterRoundsReuseThePagesOfEarlierOnes) {
  if (sanitized_malloc()) GTEST_SKIP() << "a sanitizer's allocator serves malloc here";
  MallocEnvironment environment;
  ASSERT_TRUE(keep_freed_memory());
  faults_of_a_round_of_large_blocks();
  const long pages = 3 * (12 << 20) / sysconf(_SC_PAGESIZE);
  for (int round = 0; round < 3; ++round) EXPECT_LT(faults_of_a_round_of_large_blocks(), pages / 20) << round;
}

TEST(RankReport, TheTableNamesTheSlowestRankAndHowLongOthersWaited) {
  RankTimes fast{/*compute=*/2.0, /*wait=*/1.5, /*loop=*/4.0, /*samples=*/1000, /*steps=*/16};
  RankTimes slow{/*compute=*/3.5, /*wait=*/0.1, /*loop=*/4.0, /*samples=*/1000, /*steps=*/16};
  const std::string table = format_rank_table("epoch 3", {fast, slow, fast});
  EXPECT_NE(table.find("[ringtorch] epoch 3, per rank:  rank   samples  steps  samples/s  compute s  comm wait s\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("    1      1000     16      250.0       3.50         0.10\n"), std::string::npos) << table;
  EXPECT_NE(table.find("slowest: rank 1 (3.50 ms of compute per sample, 1.75x the fastest, rank 0); the others waited "
                       "up to 1.50 s"),
            std::string::npos)
      << table;
  EXPECT_EQ(format_rank_table("epoch 1", {fast}).find("slowest"), std::string::npos) << "one rank: nobody waits";
  RankTimes sum = fast;
  sum += slow;
  EXPECT_EQ(sum.samples, 2000);
  EXPECT_DOUBLE_EQ(sum.compute_seconds, 5.5);
  EXPECT_NE(rank_times_json({fast}).find("\"comm_wait_s\":1.5"), std::string::npos) << rank_times_json({fast});
}

// train() on `ranks` thread ranks: mlp on the synthetic set, quiet, with `configure`'s changes.
std::vector<TrainingReport> train_thread_ranks(int ranks, const std::function<void(TrainerOptions&)>& configure) {
  std::vector<TrainingReport> reports(static_cast<size_t>(ranks));
  testing::on_thread_ranks(
      ranks,
      [&](ProcessGroup& group) {
        TrainerOptions o;
        o.dataset = "synthetic";
        o.model = "mlp";
        o.progress = "off";
        configure(o);
        reports[group.rank()] = train(o, group);
      },
      std::chrono::milliseconds(120000));
  return reports;
}
std::vector<TrainingReport> train_two_thread_ranks(const std::function<void(TrainerOptions&)>& configure) {
  return train_thread_ranks(2, configure);
}

// Two ranks, each running DataParallel over two CPU "devices", train like two ranks with one
// device each: DataParallel's summed half-batch gradients are the full batch's.
TEST(Trainer, DataParallelInsideEachRankMatchesOneDevicePerRank) {
  auto run = [](std::vector<c10::Device> devices) {
    return train_two_thread_ranks([&](TrainerOptions& o) { o.devices = devices; });
  };
  const auto single = run({c10::Device("cpu")});
  const auto replicated = run({c10::Device("cpu"), c10::Device("cpu")});
  EXPECT_EQ(single[0].device, "cpu");
  EXPECT_EQ(replicated[0].device, "cpu,cpu");
  ASSERT_EQ(replicated[0].parameter_checksums.size(), 2u);
  EXPECT_EQ(replicated[0].parameter_checksums[0], replicated[0].parameter_checksums[1]);
  EXPECT_NEAR(replicated[0].parameter_checksums[0], single[0].parameter_checksums[0],
              1e-3 * std::max(1.0, std::fabs(single[0].parameter_checksums[0])));
  EXPECT_GT(replicated[0].test_accuracy, 0.9);  // the synthetic classes are easy
  EXPECT_NEAR(replicated[0].test_accuracy, single[0].test_accuracy, 0.005);
}

TEST(GradCompression, TheReportNamesPowerSgdEvenWhereNoStepRanCompressed) {
  TrainingReport report;
  report.grad_compression = "powersgd:4";
  report.powersgd_start_step = 1000;  // past the end of a short run: every step was plain
  EXPECT_NE(
      report.to_json().find(R"("powersgd":{"elements_per_step":null,"elements_sent_per_step":null,"start_step":1000})"),
      std::string::npos)
      << report.to_json();
  report.powersgd_elements_before = 1863690;
  report.powersgd_elements_after = 21618;
  EXPECT_NE(report.to_json().find(R"("elements_per_step":1863690,"elements_sent_per_step":21618,"start_step":1000)"),
            std::string::npos)
      << report.to_json();
  report.grad_compression = "bf16";
  EXPECT_EQ(report.to_json().find("\"powersgd\""), std::string::npos) << report.to_json();
}

TEST(GradCompression, TheFlagsFormsAndItsErrors) {
  EXPECT_EQ(parse_grad_compression("none").describe(), "none");
  EXPECT_EQ(parse_grad_compression("bf16").describe(), "bf16");
  EXPECT_EQ(parse_grad_compression("powersgd").describe(), "powersgd:4");
  EXPECT_EQ(parse_grad_compression("powersgd:16").describe(), "powersgd:16");
  for (const char* bad : {"powersgd:0", "powersgd:-1", "powersgd:x", "powersgd:", "zip", "fp16:2", "powersgd:99999"}) {
    const std::string message = error_of([&] { parse_grad_compression(bad); });
    EXPECT_NE(message.find(str_cat("--grad-compression ", bad,
                                   ": accepted forms are none, fp16, bf16, powersgd and "
                                   "powersgd:RANK")),
              std::string::npos)
        << message;
  }
  // --powersgd-start-step counts PowerSGD's plain steps: with another compression it would do
  // nothing, so it is refused; with powersgd it is taken.
  for (const char* compression : {"none", "fp16", "bf16"}) {
    const std::string message = error_of([&] {
      TrainerOptions o;
      RendezvousOptions r;
      apply_trainer_flag("--grad-compression", compression, o, r);
      apply_trainer_flag("--powersgd-start-step", "5", o, r);
      validate(o);
    });
    EXPECT_NE(message.find(str_cat("--powersgd-start-step 5: needs --grad-compression powersgd or powersgd:RANK")),
              std::string::npos)
        << compression << ": " << message;
  }
  TrainerOptions o;
  RendezvousOptions r;
  apply_trainer_flag("--grad-compression", "powersgd:2", o, r);
  apply_trainer_flag("--powersgd-start-step", "5", o, r);
  validate(o);
  EXPECT_EQ(o.powersgd_start_step, 5);
}

// A checkpoint's PowerSGD errors hold one row per rank: the same world size takes its own row,
// another takes their mean.
TEST(GradCompression, CheckpointErrorsRowPerRankOrTheirMean) {
  const at::Tensor rows = at::tensor({1.0f, 2.0f, 3.0f, 5.0f}).view({2, 2});
  const std::map<std::string, at::Tensor> saved = {{"powersgd.step", at::full({1}, 7, at::kLong)},
                                                   {"powersgd.errors.0", rows}};
  PowerSgdState same(PowerSgdOptions{});
  EXPECT_EQ(restore_powersgd_from_checkpoint(same, saved, /*rank=*/1, /*world=*/2), "");
  EXPECT_EQ(same.step(), 7);
  EXPECT_TRUE(at::equal(same.state_dict().at("error.0"), rows[1]));
  PowerSgdState other(PowerSgdOptions{});
  EXPECT_NE(restore_powersgd_from_checkpoint(other, saved, 0, 3).find("from 2 ranks; each of the 3 ranks starts from"),
            std::string::npos);
  EXPECT_TRUE(at::equal(other.state_dict().at("error.0"), at::tensor({2.0f, 3.5f})));
}

// Removes the checkpoints saved at these steps (data and checksum), so that a resume starts at an
// older one.
void remove_checkpoints(const std::string& dir, std::initializer_list<int> steps) {
  for (int step : steps) {
    char name[32];
    std::snprintf(name, sizeof(name), "/checkpoint-%010d", step);
    for (const char* suffix : {".pt", ".pt.crc32"}) {
      const std::string path = dir + name + suffix;
      ASSERT_TRUE(std::filesystem::remove(path)) << path;
    }
  }
}

// ringtrain's training with --grad-compression powersgd:2 on two thread ranks: a run resumed
// from a checkpoint taken inside the second epoch (PowerSGD running since step 3) ends with
// exactly the uninterrupted run's weights; so does the run that wrote the checkpoints.
TEST(Trainer, PowerSgdResumedInsideAnEpochContinuesExactly) {
  const testing::TempDir temp;
  const std::string dir = temp.file("checkpoints");
  auto run = [&](bool checkpoints, bool resume) {
    return train_two_thread_ranks([&](TrainerOptions& o) {
      o.epochs = 2;
      o.max_train_samples = 1280;  // 10 steps an epoch
      o.threads = 1;
      o.grad_compression = "powersgd:2";
      o.powersgd_start_step = 3;
      if (checkpoints) {
        o.checkpoint_dir = dir;
        o.checkpoint_every_steps = 4;
        o.resume = resume;
      }
    });
  };
  const auto uninterrupted = run(false, false);
  EXPECT_EQ(uninterrupted[0].grad_compression, "powersgd:2");
  // mlp: one 10 x 784 weight, sent as P (10 x 2) and Q (784 x 2), and its bias of 10 as it is.
  EXPECT_EQ(uninterrupted[0].powersgd_elements_before, 784 * 10 + 10);
  EXPECT_EQ(uninterrupted[0].powersgd_elements_after, 10 + (10 + 784) * 2);
  ASSERT_EQ(uninterrupted[0].parameter_checksums.size(), 2u);
  EXPECT_EQ(uninterrupted[0].parameter_checksums[0], uninterrupted[0].parameter_checksums[1]);
  const auto with_checkpoints = run(true, false);
  EXPECT_EQ(with_checkpoints[0].parameter_checksums, uninterrupted[0].parameter_checksums);
  // Saved at steps 4, 8, 10 (epoch 1's end), 12, 16, 20; the newest three are kept. Remove 16
  // and 20, so that the resume starts at step 12, two steps into epoch 2.
  remove_checkpoints(dir, {16, 20});
  const auto resumed = run(true, true);
  EXPECT_EQ(resumed[0].epoch_seconds.size(), 1u);  // epoch 2 only
  EXPECT_EQ(resumed[0].parameter_checksums, uninterrupted[0].parameter_checksums);
}

// With --balance 0:1:1 rank 0 sits out and ranks 1 and 2 train (with one rank training, DDP
// runs no hook); rank 0 writes the checkpoints. At the epoch's end it is handed PowerSGD's step
// and Q with the weights, so the checkpoint holds the state the others trained with (before,
// rank 0's own: step 0, no Q, and a resume ran the plain steps again). Its errors differ in size
// from theirs, so the checkpoint keeps none.
TEST(Trainer, ARankThatSatOutIsHandedPowerSgdsStepAndQ) {
  const testing::TempDir temp;
  const std::string dir = temp.file("checkpoints");
  const auto reports = train_thread_ranks(3, [&](TrainerOptions& o) {
    o.epochs = 2;
    o.max_train_samples = 1920;  // 10 steps an epoch
    o.threads = 1;
    o.balance = "0:1:1";
    o.grad_compression = "powersgd:2";
    o.powersgd_start_step = 3;
    o.checkpoint_dir = dir;
  });
  ASSERT_EQ(reports[0].parameter_checksums.size(), 3u);
  EXPECT_EQ(reports[0].parameter_checksums[0], reports[0].parameter_checksums[1]);
  EXPECT_EQ(reports[0].parameter_checksums[0], reports[0].parameter_checksums[2]);
  // The checkpoints of both epochs' ends, in order: each holds its own step's PowerSGD state.
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".pt") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  ASSERT_EQ(paths.size(), 2u) << "one checkpoint per epoch in " << dir;
  std::vector<at::Tensor> qs;
  for (const std::string& path : paths) {
    const std::string bytes = testing::read_file(path);
    const auto dict = read_torch_save(std::vector<char>(bytes.begin(), bytes.end()), path).toGenericDict();
    const int64_t step = dict.at("step").toInt();
    const auto extra = dict.at("extra_state").toGenericDict();
    EXPECT_EQ(extra.at("powersgd.step").toTensor().item<int64_t>(), step) << path;
    ASSERT_TRUE(extra.contains("powersgd.q.0")) << path;
    qs.push_back(extra.at("powersgd.q.0").toTensor());
    for (const auto& entry : extra) {
      EXPECT_EQ(entry.key().toStringRef().rfind("powersgd.errors.", 0), std::string::npos) << path;
    }
  }
  EXPECT_FALSE(at::equal(qs[0], qs[1])) << "the second epoch's hand-over gave the same Q again";
}

// A start with nothing left to train (a resume, or an in-process recovery, at the end of the last
// epoch) reports the accuracy of the weights it took over, not a zero, and no loss.
TEST(Trainer, NothingLeftToTrainStillMeasuresTheWeights) {
  const testing::TempDir temp;
  const std::string dir = temp.file("checkpoints");
  auto run = [&](bool resume) {
    return train_two_thread_ranks([&](TrainerOptions& o) {
      o.epochs = 1;
      o.max_train_samples = 1280;
      o.threads = 1;
      o.checkpoint_dir = dir;
      o.resume = resume;
    });
  };
  const auto finished = run(false);
  ASSERT_GT(finished[0].test_accuracy, 0.5);
  const auto again = run(true);
  EXPECT_TRUE(again[0].epoch_seconds.empty());
  EXPECT_EQ(again[0].test_accuracy, finished[0].test_accuracy);
  EXPECT_TRUE(std::isnan(again[0].final_loss));
  EXPECT_EQ(again[0].parameter_checksums, finished[0].parameter_checksums);
  EXPECT_NE(again[0].to_json().find("\"final_loss\":null"), std::string::npos) << again[0].to_json();
}

// --local-steps and the outer settings: a bad value stops with the flag's name; --local-steps
// with --grad-compression other than none is refused (they do not combine: local steps send no
// gradients), and the outer settings without --local-steps are refused too.
TEST(LocalSteps, BadFlagsNameTheFlag) {
  const std::vector<std::pair<std::vector<std::pair<std::string, std::string>>, std::string>> cases = {
      {{{"--local-steps", "0"}}, "--local-steps"},
      {{{"--local-steps", "-1"}}, "--local-steps"},
      {{{"--local-steps", "x"}}, "--local-steps"},
      {{{"--outer-lr", "0"}}, "--outer-lr 0: must be positive"},
      {{{"--outer-lr", "-1"}}, "--outer-lr"},
      {{{"--outer-lr", "nan"}}, "--outer-lr"},
      {{{"--outer-momentum", "1"}}, "--outer-momentum 1: must be below 1"},
      {{{"--outer-momentum", "-0.1"}}, "--outer-momentum"},
      {{{"--outer-momentum", "x"}}, "--outer-momentum"},
      {{{"--outer-compression", "fp16"}}, "--outer-compression fp16: use none or bf16"},
      {{{"--local-steps", "4"}, {"--grad-compression", "powersgd"}},
       "--local-steps 4: does not combine with --grad-compression powersgd"},
      {{{"--outer-momentum", "0.5"}}, "need --local-steps"},
      {{{"--outer-overlap", "2"}}, "need --local-steps"},
      {{{"--outer-overlap", "-1"}}, "--outer-overlap"},
      {{{"--local-steps", "4"}, {"--outer-overlap", "2"}, {"--elastic", "in-process"}},
       "--outer-overlap does not combine with --elastic in-process"},
      {{{"--balance", "dynamic"}}, "--balance dynamic: needs --local-steps"},
  };
  for (const auto& [flags, expected] : cases) {
    const std::string message = error_of([&] {
      TrainerOptions o;
      RendezvousOptions r;
      for (const auto& [flag, value] : flags) apply_trainer_flag(flag, value, o, r);
      validate(o);
    });
    EXPECT_NE(message.find(expected), std::string::npos) << flags[0].first << " " << flags[0].second << ": " << message;
  }
  TrainerOptions o;
  RendezvousOptions r;
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--local-steps", "16"}, {"--outer-lr", "1"}, {"--outer-momentum", "0"}, {"--outer-compression", "bf16"}}) {
    apply_trainer_flag(flag, value, o, r);
  }
  validate(o);
  EXPECT_EQ(o.local_steps, 16);
  EXPECT_EQ(o.outer_compression, "bf16");
}

// One inner step per period, outer lr 1 and no outer momentum is DDP (local_sgd.h): train()
// ends at DDP's weights to float rounding, and says how it trained.
TEST(Trainer, OneLocalStepWithoutOuterMomentumTrainsAsDdp) {
  const auto ddp = train_two_thread_ranks([](TrainerOptions& o) { o.max_train_samples = 1280; });
  const auto local = train_two_thread_ranks([](TrainerOptions& o) {
    o.max_train_samples = 1280;
    o.local_steps = 1;
    o.outer_lr = 1;
    o.outer_momentum = 0;
  });
  ASSERT_EQ(local[0].parameter_checksums.size(), 2u);
  EXPECT_EQ(local[0].parameter_checksums[0], local[0].parameter_checksums[1]);
  EXPECT_NEAR(local[0].parameter_checksums[0], ddp[0].parameter_checksums[0],
              1e-4 * std::max(1.0, std::fabs(ddp[0].parameter_checksums[0])));
  EXPECT_EQ(local[0].local_steps, 1);
  EXPECT_EQ(local[0].outer_steps, 10);
  EXPECT_NE(local[0].to_json().find("\"local_steps\":{"), std::string::npos) << local[0].to_json();
  EXPECT_NE(local[0].ranks_json.find("\"steps\":10"), std::string::npos) << local[0].ranks_json;
}

// --local-steps 3 on two thread ranks: a run resumed from a checkpoint taken at an outer step
// inside the second epoch ends with exactly the uninterrupted run's weights: the outer momentum
// and every rank's own inner optimizer (SGD's momentum, which differs between the ranks) come
// back from the checkpoint.
TEST(Trainer, LocalStepsResumedInsideAnEpochContinuesExactly) {
  const testing::TempDir temp;
  const std::string dir = temp.file("checkpoints");
  auto run = [&](bool checkpoints, bool resume) {
    return train_two_thread_ranks([&](TrainerOptions& o) {
      o.epochs = 2;
      o.max_train_samples = 1280;  // 10 batches of 64 per rank an epoch: periods of 3, 3, 3 and 1
      o.threads = 1;
      o.local_steps = 3;
      if (checkpoints) {
        o.checkpoint_dir = dir;
        o.checkpoint_every_steps = 1;  // every outer step
        o.resume = resume;
      }
    });
  };
  const auto uninterrupted = run(false, false);
  EXPECT_EQ(uninterrupted[0].outer_steps, 8);
  ASSERT_EQ(uninterrupted[0].parameter_checksums.size(), 2u);
  EXPECT_EQ(uninterrupted[0].parameter_checksums[0], uninterrupted[0].parameter_checksums[1]);
  const auto with_checkpoints = run(true, false);
  EXPECT_EQ(with_checkpoints[0].parameter_checksums, uninterrupted[0].parameter_checksums);
  // Saved at outer steps 1-8; the newest three (6, 7, 8) are kept. Remove 7 and 8, so that the
  // resume starts at outer step 6, two periods into epoch 2.
  remove_checkpoints(dir, {7, 8});
  const auto resumed = run(true, true);
  EXPECT_EQ(resumed[0].epoch_seconds.size(), 1u);  // epoch 2 only
  EXPECT_EQ(resumed[0].parameter_checksums, uninterrupted[0].parameter_checksums);
}

// The same with --outer-overlap 2: the periods before a checkpoint synchronize, so a checkpoint
// still holds one set of weights, and a resume continues exactly as the run that wrote it.
TEST(Trainer, LocalStepsWithOverlapResumeExactly) {
  const testing::TempDir temp;
  const std::string dir = temp.file("checkpoints");
  auto run = [&](bool resume) {
    return train_two_thread_ranks([&](TrainerOptions& o) {
      o.epochs = 2;
      o.max_train_samples = 1280;  // periods of 3, 3, 3 and 1 batches of 64 per rank an epoch
      o.threads = 1;
      o.local_steps = 3;
      o.outer_overlap = 2;
      o.checkpoint_dir = dir;
      o.checkpoint_every_steps = 2;  // outer steps 2, 4 (epoch 1's end), 6 and 8
      o.resume = resume;
    });
  };
  // The run that writes checkpoints is the reference: its synchronized periods are part of its
  // course (a run without checkpoints synchronizes only at epoch ends).
  const auto with_checkpoints = run(false);
  EXPECT_EQ(with_checkpoints[0].outer_overlap, 2);
  ASSERT_EQ(with_checkpoints[0].parameter_checksums.size(), 2u);
  EXPECT_EQ(with_checkpoints[0].parameter_checksums[0], with_checkpoints[0].parameter_checksums[1]);
  remove_checkpoints(dir, {8});  // resume at outer step 6, two periods into epoch 2
  const auto resumed = run(true);
  EXPECT_EQ(resumed[0].epoch_seconds.size(), 1u);
  EXPECT_EQ(resumed[0].parameter_checksums, with_checkpoints[0].parameter_checksums);
}

// --balance dynamic: the ranks claim each period's batches as they go (batch_claims.h). Every
// batch of every period is trained once, by one rank or the other (how many each takes depends
// on timing), and the replicas are equal at the end.
TEST(Trainer, DynamicBalanceTrainsEveryBatchOnce) {
  const auto reports = train_two_thread_ranks([](TrainerOptions& o) {
    o.epochs = 2;
    o.max_train_samples = 1280;  // 20 batches of 64 an epoch: periods of 6, 6, 6 and 2
    o.threads = 1;
    o.local_steps = 3;
    o.balance = "dynamic";
  });
  ASSERT_EQ(reports[0].parameter_checksums.size(), 2u);
  EXPECT_EQ(reports[0].parameter_checksums[0], reports[0].parameter_checksums[1]);
  EXPECT_EQ(reports[0].outer_steps, 8);
  EXPECT_EQ(reports[0].balance, "dynamic");
  int64_t samples = 0, steps = 0;
  for (const auto& rank : nlohmann::json::parse(reports[0].ranks_json)) {
    samples += rank.at("samples").get<int64_t>();
    steps += rank.at("steps").get<int64_t>();
  }
  EXPECT_EQ(samples, 2 * 1280) << reports[0].ranks_json;
  EXPECT_EQ(steps, 2 * 20) << reports[0].ranks_json;
  EXPECT_GT(reports[0].test_accuracy, 0.5);
}

// --balance dynamic resumed from a checkpoint taken at an outer step inside the second epoch:
// the resume trains exactly the batches left after it (claimed afresh over a new run's counters),
// and the replicas agree. Not the uninterrupted run's weights: who trains which batch depends on
// timing (batch_claims.h).
TEST(Trainer, DynamicBalanceResumedTrainsWhatIsLeft) {
  const testing::TempDir temp;
  const std::string dir = temp.file("checkpoints");
  auto run = [&](bool resume) {
    return train_two_thread_ranks([&](TrainerOptions& o) {
      o.epochs = 2;
      o.max_train_samples = 1280;  // 20 batches of 64 an epoch: periods of 6, 6, 6 and 2
      o.threads = 1;
      o.local_steps = 3;
      o.balance = "dynamic";
      o.checkpoint_dir = dir;
      o.checkpoint_every_steps = 1;  // every outer step
      o.resume = resume;
    });
  };
  const auto whole = run(false);
  EXPECT_EQ(whole[0].outer_steps, 8);
  // Saved at outer steps 1-8; the newest three are kept. Without 7 and 8 the resume starts at
  // outer step 6, two periods (12 batches) into epoch 2: 8 batches of 64 are left.
  remove_checkpoints(dir, {7, 8});
  const auto resumed = run(true);
  EXPECT_EQ(resumed[0].epoch_seconds.size(), 1u);
  EXPECT_EQ(resumed[0].outer_steps, 8);  // counted on from the checkpoint's 6
  ASSERT_EQ(resumed[0].parameter_checksums.size(), 2u);
  EXPECT_EQ(resumed[0].parameter_checksums[0], resumed[0].parameter_checksums[1]);
  int64_t samples = 0;
  for (const auto& rank : nlohmann::json::parse(resumed[0].ranks_json)) samples += rank.at("samples").get<int64_t>();
  EXPECT_EQ(samples, 8 * 64) << resumed[0].ranks_json;
}

}  // namespace
}  // namespace ringtorch
