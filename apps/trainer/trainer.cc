#include "apps/trainer/trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "apps/plot/run_plot.h"
#include "apps/trainer/blas_threads.h"
#include "apps/trainer/device_selection.h"
#include "apps/trainer/progress.h"
#include "apps/trainer/rank_report.h"
#include "base/atomic_file.h"
#include "base/batch_split.h"
#include "base/error.h"
#include "base/parse.h"
#include "datasets/distributed_sampler.h"
#include "datasets/image_dataset.h"
#include "datasets/weighted_sampler.h"
#include "models/registry.h"
#include "rendezvous/init_method.h"
#include "runtime/trace/timeline.h"
#include "runtime/training/batch_balancer.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/data_parallel.h"
#include "runtime/training/distributed_data_parallel.h"
#include "runtime/training/state_broadcast.h"

namespace ringtorch {
namespace {

using Clock = std::chrono::steady_clock;

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainerOptions& o, torch::nn::Module& model) {
  if (o.optimizer == "adam") {
    return std::make_unique<torch::optim::Adam>(model.parameters(),
                                                torch::optim::AdamOptions(o.lr).weight_decay(o.weight_decay));
  }
  return std::make_unique<torch::optim::SGD>(
      model.parameters(), torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
}

// LOCAL_RANK as ringrun and torchrun set it; 0 when run by hand.
int local_rank() {
  const char* text = std::getenv("LOCAL_RANK");
  return text && *text ? parse_int_in_range(text, 0, 1 << 20, "LOCAL_RANK") : 0;
}

// The model on its device(s): one module, or DataParallel replicas (its primary is module()).
struct PlacedModel {
  torch::nn::AnyModule single;
  std::unique_ptr<DataParallel> replicas;
  torch::nn::Module& module() { return replicas ? replicas->module() : *single.ptr(); }
  torch::Tensor forward(const torch::Tensor& x) { return replicas ? replicas->forward(x) : single.forward(x); }
};

PlacedModel place_model(const TrainerOptions& o, const ImageShape& shape, const std::vector<c10::Device>& devices) {
  // Modules draw their initial weights from LibTorch's default generator, one per process, and
  // train() may run on several threads of one process (tests' thread ranks): seeding and the
  // draws after it hold this lock, so that each rank's model starts from o.seed whatever the
  // others draw meanwhile. (Without it, 1 run in 10-20 of trainer_test's DataParallel case
  // started rank 0 from other weights; TSan named the generator.)
  static std::mutex default_generator;
  std::lock_guard<std::mutex> lock(default_generator);
  PlacedModel placed;
  torch::manual_seed(o.seed);
  if (devices.size() == 1) {
    placed.single = make_model(o.model, shape);
    placed.single.ptr()->to(devices[0]);
  } else {
    // Every replica starts from the same seed; DataParallel copies the primary's weights anyway.
    placed.replicas = std::make_unique<DataParallel>(
        [&] {
          torch::manual_seed(o.seed);
          return make_model(o.model, shape);
        },
        devices);
  }
  return placed;
}

// Test accuracy over the whole test set: each rank takes every world_size-th image (no
// padding, so nothing is counted twice), the counts are summed across ranks.
std::pair<int64_t, int64_t> evaluate(PlacedModel& model, const ImageDataset& test, ProcessGroup& group, int batch_size,
                                     const c10::Device& device) {
  torch::NoGradGuard no_grad;
  model.module().eval();
  int64_t correct = 0, total = 0;
  std::vector<int64_t> indices;
  for (int64_t i = group.rank(); i < test.size(); i += group.size()) indices.push_back(i);
  for (size_t start = 0; start < indices.size(); start += batch_size) {
    std::vector<int64_t> chunk(indices.begin() + start, indices.begin() + std::min(indices.size(), start + batch_size));
    auto [x, y] = test.batch(chunk);
    correct += model.forward(x.to(device)).argmax(1).cpu().eq(y).sum().item<int64_t>();
    total += static_cast<int64_t>(chunk.size());
  }
  model.module().train();
  at::Tensor counts = at::tensor({correct, total}, at::kLong);
  group.allreduce(counts, ReduceOp::kSum);
  return {counts[0].item<int64_t>(), counts[1].item<int64_t>()};
}

// --timeline: every rank's trace to rank 0 (lengths allgathered, then the bytes gathered to rank
// 0 in blocks of the longest), which merges them into one file. Works across hosts without a
// shared filesystem; only rank 0 holds all of them.
void write_gathered_timeline(ProcessGroup& group, const std::string& path) {
  const std::string mine = Timeline::chrome_trace_json();
  int64_t length = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lengths(static_cast<size_t>(group.size()));
  group.allgather(&length, lengths.data(), 1, c10::ScalarType::Long);
  const int64_t block = *std::max_element(lengths.begin(), lengths.end());
  at::Tensor local = at::zeros({block}, at::kByte);
  std::memcpy(local.data_ptr<uint8_t>(), mine.data(), mine.size());
  at::Tensor all = group.rank() == 0 ? at::empty({block * group.size()}, at::kByte) : at::Tensor();
  group.gather(local, all, /*root=*/0);
  if (group.rank() != 0) return;
  std::vector<std::string> traces, names;
  const char* bytes = reinterpret_cast<const char*>(all.data_ptr<uint8_t>());
  for (size_t r = 0; r < lengths.size(); ++r) {
    traces.emplace_back(bytes + static_cast<int64_t>(r) * block, static_cast<size_t>(lengths[r]));
    names.push_back(str_cat("of rank ", r));
  }
  size_t events = 0;
  const std::string merged = merge_chrome_trace_texts(traces, names, &events);
  write_file_atomically(path, merged, "--timeline");
  std::printf(
      "[ringtorch] timeline: %s (%d ranks, %zu events); open it in https://ui.perfetto.dev or chrome://tracing\n",
      path.c_str(), group.size(), events);
}

// Note [Resuming inside an epoch]
// A checkpoint taken inside an epoch records how many samples of the epoch's order (the seeded
// shuffle every rank computes, epoch_order()) the job trained: with DistributedSampler's
// strided split and equal batches, after k steps of batch b on W ranks these are exactly the
// first k x b x W of the order; with --balance, the first k x global batch. A restarted job,
// with any world size, deals out the rest of the order, so no sample of the interrupted epoch
// is trained twice or skipped; only the padding that evens out the ranks (at most W - 1
// samples, or the last step's, as DistributedSampler always pads) repeats some. The steps after
// the newest checkpoint and before the failure are lost and trained again.
std::map<std::string, std::string> checkpoint_metadata(const TrainerOptions& o, int world) {
  return {{"model", o.model}, {"dataset", o.dataset}, {"world_size", std::to_string(world)}};
}

// "resumed at epoch 2 step 937 with world size 3 (was 2); ..." for rank 0's log.
std::string describe_resume(const TrainingProgress& p, const TrainerOptions& o, int world) {
  std::string text = str_cat("resumed at epoch ", p.epoch + 1, " step ", p.step, " with world size ", world);
  const auto was = p.metadata.find("world_size");
  if (was == p.metadata.end()) return text;
  text += str_cat(" (was ", was->second, ")");
  if (p.samples_in_epoch > 0) {
    text +=
        str_cat("; ", p.samples_in_epoch, " samples of epoch ", p.epoch + 1, " were trained, the rest is dealt out");
  }
  if (was->second != std::to_string(world)) {
    if (o.balance != "equal" && o.global_batch > 0) {
      text += str_cat("; the global batch stays ", o.global_batch, " (--global-batch)");
    } else {
      text += str_cat("; --batch-size ", o.batch_size, " is per rank, so the global batch is now ",
                      int64_t{o.batch_size} * world, " (was ", o.batch_size, " x ", was->second, "); --lr stays ", o.lr,
                      " (scale it yourself to follow the linear scaling rule)");
    }
  }
  return text;
}

}  // namespace

void validate(const TrainerOptions& o) {
  auto bad = [](const std::string& key, const std::string& value, const std::string& why) {
    throw InvalidArgumentError(str_cat(key, " ", value, ": ", why));
  };
  if (o.epochs < 1) bad("--epochs", std::to_string(o.epochs), "must be at least 1");
  if (o.batch_size < 1) bad("--batch-size", std::to_string(o.batch_size), "must be at least 1");
  if (!(o.lr > 0)) bad("--lr", std::to_string(o.lr), "must be positive");
  if (o.momentum < 0) bad("--momentum", std::to_string(o.momentum), "must not be negative");
  if (o.weight_decay < 0) bad("--weight-decay", std::to_string(o.weight_decay), "must not be negative");
  if (o.optimizer != "sgd" && o.optimizer != "adam") bad("--optimizer", o.optimizer, "use sgd or adam");
  if (o.threads < 0) bad("--threads", std::to_string(o.threads), "must not be negative");
  if (o.resume && o.checkpoint_dir.empty()) bad("--resume", "", "needs --checkpoint-dir");
  if (o.checkpoint_every_steps > 0 && o.checkpoint_dir.empty()) {
    bad("--checkpoint-every-steps", std::to_string(o.checkpoint_every_steps), "needs --checkpoint-dir");
  }
  if (o.log_interval < 0) bad("--log-interval", std::to_string(o.log_interval), "must not be negative");
  if (o.balance != "equal" && o.balance != "auto") {
    const std::vector<double> weights = parse_weights(o.balance);
    if (std::all_of(weights.begin(), weights.end(), [](double w) { return w == 0; })) {
      bad("--balance", o.balance, "every rank's weight is 0");
    }
  }
  if (o.global_batch < 0) bad("--global-batch", std::to_string(o.global_batch), "must be at least 1");
  if (o.global_batch > 0 && o.balance == "equal")
    bad("--global-batch", std::to_string(o.global_batch), "needs --balance auto or weights");
  parse_progress_style(o.progress, stdout);
  if (!o.plot_path.empty()) {
    if (o.plot_path.size() < 4 || o.plot_path.substr(o.plot_path.size() - 4) != ".svg")
      bad("--plot", o.plot_path, "give a file name ending in .svg");
    if (!can_plot())
      bad("--plot", o.plot_path, "this build has no PLplot; apt-get install libplplot-dev, then rebuild");
  }
  // The flags' own errors (names, repeats); whether the CUDA devices exist is checked in train().
  if (o.devices.empty()) select_devices(o.device, o.gpus, 0, /*cuda_device_count=*/1024);
}

std::string TrainingReport::to_json() const {
  nlohmann::json j = {{"world_size", world_size},
                      {"device", device},
                      {"samples_per_s", samples_per_second},
                      {"epoch_seconds", epoch_seconds},
                      {"final_loss", final_loss},
                      {"test_accuracy", test_accuracy},
                      {"parameter_checksums", parameter_checksums}};
  if (!ranks_json.empty()) j["ranks"] = nlohmann::json::parse(ranks_json);
  if (!split.empty()) {
    j["balance"] = balance;
    j["split"] = split;
    j["weights"] = weights;
  }
  return j.dump();
}

TrainingReport train(const TrainerOptions& o, ProcessGroup& group, const ElasticHooks& elastic) {
  validate(o);
  if (!o.timeline_path.empty()) Timeline::start();
  if (Timeline::enabled()) Timeline::name_this_thread("training loop");
  if (o.threads > 0) {
    torch::set_num_threads(o.threads);
    set_blas_threads(o.threads);  // OpenBLAS keeps its own pool (blas_threads.h)
  }
  const int rank = group.rank(), world = group.size();
  // Every rank reads the whole set once; batches are gathered by the sampler's indices.
  ElasticHooks::Datasets own;
  ElasticHooks::Datasets& data = elastic.datasets ? *elastic.datasets : own;
  if (!data.train) {
    data.train = load_dataset(o.dataset, o.data_dir, /*train=*/true);
    data.test = load_dataset(o.dataset, o.data_dir, /*train=*/false);
    if (rank == 0) std::printf("%s; %s\n", data.train->description.c_str(), data.test->description.c_str());
  }
  const ImageDataset& train_set = *data.train;
  const ImageDataset& test_set = *data.test;
  DeviceSelection selection;
  if (!o.devices.empty()) {
    selection.devices = o.devices;
  } else {
    selection = select_devices(o.device, o.gpus, local_rank(), static_cast<int>(torch::cuda::device_count()));
  }
  if (!selection.note.empty() && rank == 0) std::printf("%s\n", selection.note.c_str());
  const c10::Device device = selection.devices[0];
  const ImageShape shape{train_set.channels(), train_set.height(), train_set.width(), ImageDataset::kClasses};
  PlacedModel model = place_model(o, shape, selection.devices);
  const std::shared_ptr<ProcessGroup> borrowed(&group, [](ProcessGroup*) {});
  DdpOptions ddp_options;
  ddp_options.uneven_inputs = o.balance != "equal";  // Note [Uneven inputs]: the weighted average
  auto make_ddp = [&](const std::shared_ptr<ProcessGroup>& training_group) {
    return model.replicas ? std::make_unique<DistributedDataParallel>(*model.replicas, training_group, ddp_options)
                          : std::make_unique<DistributedDataParallel>(model.single, training_group, ddp_options);
  };
  // Null on a rank that sits out (--balance auto): the others then train in a subgroup.
  std::unique_ptr<DistributedDataParallel> ddp = make_ddp(borrowed);
  auto optimizer = make_optimizer(o, model.module());

  TrainingProgress progress;
  std::optional<Checkpointer> checkpoints;
  if (!o.checkpoint_dir.empty()) {
    checkpoints.emplace(o.checkpoint_dir);
    if (o.resume) {
      if (auto resumed = checkpoints->load_latest(model.module(), optimizer.get())) {
        progress = *resumed;
        if (rank == 0) std::printf("%s\n", describe_resume(progress, o, world).c_str());
        std::fflush(stdout);  // the moment training resumes, for logs and bench/compare_elastic
      }
    }
  }
  if (elastic.state) {
    // In-process recovery: the newest state any rank committed (a new group after a lost peer
    // or a node that joined); none in a fresh job, which commits what it starts from.
    if (auto committed = elastic.state->sync(group, model.module(), optimizer.get())) {
      progress = *committed;
      if (rank == 0) {
        std::printf("recovered in process at epoch %lld step %lld with world size %d: the state rank %d committed\n",
                    (long long)progress.epoch + 1, (long long)progress.step, world, elastic.state->last_source());
        std::fflush(stdout);
      }
    } else {
      elastic.state->commit(model.module(), optimizer.get(), progress);
    }
  }
  std::ofstream metrics;
  if (rank == 0 && !o.metrics_path.empty()) {
    metrics.open(o.metrics_path, std::ios::app);
    if (!metrics) throw IoError(str_cat("--metrics ", o.metrics_path, ": cannot open for writing"));
  }
  // Which indices each step trains on: DistributedSampler's share in batch_size chunks, or with
  // --balance this rank's part of each global batch (WeightedDistributedSampler).
  const bool weighted = o.balance != "equal";
  const SamplerOptions sampler_options{/*shuffle=*/true, o.seed, /*drop_last=*/false};
  const int64_t train_size =
      o.max_train_samples > 0 ? std::min<int64_t>(o.max_train_samples, train_set.size()) : train_set.size();
  DistributedSampler sampler(train_size, world, rank, sampler_options);
  std::optional<WeightedDistributedSampler> weighted_sampler;
  std::optional<BatchBalancer> balancer;
  if (weighted) {
    const int64_t global_batch = o.global_batch > 0 ? o.global_batch : int64_t{o.batch_size} * world;
    std::vector<double> weights(static_cast<size_t>(world), 1.0);
    if (o.balance != "auto") weights = parse_weights(o.balance);
    if (weights.size() != static_cast<size_t>(world)) {
      throw InvalidArgumentError(str_cat("--balance ", o.balance, " gives ", weights.size(), " weights for ", world,
                                         " ranks; give one weight per rank"));
    }
    balancer.emplace(group, global_batch, weights, o.balance == "auto", device);
    weighted_sampler.emplace(train_size, global_batch, rank, world, sampler_options);  // split: per step, below
    if (rank == 0) std::printf("[ringtorch] balance: %s\n", balancer->describe().c_str());
  }
  // When a rank sits out (weight 0, or benched by --balance auto), the others train in a
  // subgroup of their own, so that no step waits for it (the old DDP's hooks stay registered
  // but inert). A collective of the whole group.
  auto train_without_ranks_sitting_out = [&] {
    ddp.reset();
    std::shared_ptr<ProcessGroup> training_group = group.new_group(balancer->training_ranks());
    if (!balancer->sits_out(rank)) ddp = make_ddp(training_group);
  };
  if (balancer && balancer->anyone_sits_out()) train_without_ranks_sitting_out();
  auto rebalance = [&] {
    const size_t training_before = balancer->training_ranks().size();
    if (balancer->rebalance(group)) {
      if (rank == 0) std::printf("[ringtorch] balance: %s\n", balancer->describe().c_str());
      if (balancer->training_ranks().size() != training_before) train_without_ranks_sitting_out();
    }
  };
  // At an epoch end, ranks that sat out take the state the others trained. They arrive long
  // before the others, so their first wait is the group's timeout plus twice the epoch's
  // expected length: from the last measured step time (--balance auto), or the previous
  // hand-over's wait (the first epoch of a rank given weight 0 has the timeout alone).
  double last_handover_wait = 0;  // seconds, on a rank that sits out
  auto give_state_to_ranks_sitting_out = [&](int64_t steps_in_epoch) {
    TimelineSpan span("state to ranks sitting out", "train");
    ProcessGroup::Timeout first_wait;
    const auto start = Clock::now();
    if (balancer->sits_out(rank)) {
      const double expected =
          2.0 * std::max(static_cast<double>(steps_in_epoch) * balancer->last_step_seconds(), last_handover_wait);
      first_wait = group.timeout() + std::chrono::milliseconds(static_cast<int64_t>(expected * 1e3));
    }
    broadcast_training_state(group, balancer->training_ranks().front(), model.module(), optimizer.get(), first_wait);
    last_handover_wait = std::chrono::duration<double>(Clock::now() - start).count();
  };
  // --elastic in-process: commits the state, then the ranks agree whether the generation ended
  // (one rank may see the store's key a moment before another), and all leave together.
  auto commit_and_check_membership = [&](const TrainingProgress& at) {
    TimelineSpan span("elastic commit", "train");
    elastic.state->commit(model.module(), optimizer.get(), at);
    at::Tensor ended = at::tensor({elastic.generation_ended && elastic.generation_ended() ? 1 : 0}, at::kInt);
    group.allreduce(ended, ReduceOp::kMax);
    if (ended.item<int>() != 0) {
      throw MembershipChanged(str_cat("the generation ended at step ", at.step, " (a node joins or left)"));
    }
  };
  TrainingReport report;
  report.world_size = world;
  report.device = selection.describe();
  ProgressReporter reporter(stdout, rank == 0 ? parse_progress_style(o.progress, stdout) : ProgressStyle::kOff,
                            o.log_interval);
  int64_t trained_samples = 0, steps_run = 0;
  double trained_seconds = 0;
  RankTimes run_times;                // this rank, all epochs
  std::vector<EpochMetrics> history;  // rank 0, for --plot
  for (int64_t epoch = progress.epoch; epoch < o.epochs; ++epoch) {
    TimelineSpan epoch_span("epoch", "train");
    epoch_span.set_args(str_cat("{\"epoch\":", epoch + 1, "}"));
    RankTimes epoch_times;
    // Where the epoch starts: a checkpoint taken inside it (--checkpoint-every-steps) says how
    // many of the epoch's samples the job trained (all ranks together); the samplers deal out
    // the rest over this run's ranks, whatever the world size was (Note [Resuming inside an epoch]).
    const int64_t trained_before = epoch == progress.epoch ? std::min(progress.samples_in_epoch, train_size) : 0;
    std::vector<int64_t> mine;
    int64_t steps = 0, epoch_samples = 0;
    if (weighted) {
      weighted_sampler->set_epoch(epoch, trained_before);
      steps = weighted_sampler->steps_per_epoch();
      epoch_samples = trained_before + steps * weighted_sampler->global_batch();
    } else {
      sampler.set_epoch(epoch);
      sampler.set_start(trained_before);
      mine = sampler.indices();
      steps = (static_cast<int64_t>(mine.size()) + o.batch_size - 1) / o.batch_size;
      epoch_samples = trained_before + static_cast<int64_t>(mine.size()) * world;
    }
    auto step_indices = [&](int64_t step) {
      if (weighted) {
        // The balancer's split, or on every other step of a probe's trial the trial's.
        weighted_sampler->set_split(balancer->next_step_split());
        return weighted_sampler->step_indices(step);
      }
      const size_t start = static_cast<size_t>(step * o.batch_size);
      return std::vector<int64_t>(mine.begin() + start, mine.begin() + std::min(mine.size(), start + o.batch_size));
    };
    // The job's position in the epoch after `step` steps of this run.
    auto trained_after = [&](int64_t step) {
      if (weighted) return trained_before + step * weighted_sampler->global_batch();
      return trained_before +
             static_cast<int64_t>(std::min(mine.size(), static_cast<size_t>(step * o.batch_size))) * world;
    };
    const auto epoch_start = Clock::now();
    double loss_sum = 0, loss_by_sample = 0;
    const int64_t samples_before = trained_before;
    int64_t batches = 0, samples_done = samples_before, my_samples = 0;
    // Inside the epoch (not after its last step: the epoch's end saves then), a checkpoint every
    // --checkpoint-every-steps steps (every rank calls it; rank 0 writes) and, with --elastic
    // in-process, a commit every --commit-every-steps. Neither while a rank sits out: rank 0 may
    // be the one that sat out, and its weights are behind until the epoch's end.
    auto save_inside_epoch = [&](int64_t step) {
      if (step + 1 >= steps || (balancer && balancer->anyone_sits_out())) return;
      const bool checkpoint =
          checkpoints && o.checkpoint_every_steps > 0 && progress.step % o.checkpoint_every_steps == 0;
      const bool commit = elastic.state && progress.step % elastic.commit_every_steps == 0;
      if (!checkpoint && !commit) return;
      TrainingProgress inside = progress;
      inside.epoch = epoch;
      inside.samples_in_epoch = std::min(samples_done, train_size);
      inside.metadata = checkpoint_metadata(o, world);
      if (checkpoint) {
        TimelineSpan span("checkpoint", "train");
        checkpoints->save(model.module(), optimizer.get(), inside, &group);
      }
      if (commit) commit_and_check_membership(inside);
    };
    reporter.begin_epoch(epoch, o.epochs, epoch_samples);
    for (int64_t step = 0; step < steps; ++step) {
      if (!ddp) {  // this rank sits out: count the step, as every rank does
        balancer->record_step(0, 0, 0);
        ++steps_run;
        ++progress.step;  // the job's optimizer steps, for checkpoints
        samples_done = trained_after(step + 1);
        continue;
      }
      const std::vector<int64_t> chunk = step_indices(step);
      TimelineSpan step_span("step", "train");
      if (Timeline::enabled()) {
        step_span.set_args(str_cat("{\"epoch\":", epoch + 1, ",\"step\":", step, ",\"samples\":", chunk.size(), "}"));
      }
      const auto step_start = Clock::now();
      at::Tensor x, y, loss;
      {
        TimelineSpan span("load batch", "train");
        std::tie(x, y) = train_set.batch(chunk);
        optimizer->zero_grad();
      }
      {
        TimelineSpan span("forward", "train");
        loss = torch::cross_entropy_loss(ddp->forward(x.to(device)), y.to(device));
      }
      {
        TimelineSpan span("backward", "train");  // DDP's buckets are reduced inside it
        loss.backward();
      }
      {
        TimelineSpan span("optimizer", "train");
        optimizer->step();
      }
      const double batch_loss = loss.item<double>();
      // Compute time: the step without its waits for the others (the agreement at forward,
      // the end of backward waiting for buckets), where time this process stood still for
      // its CPU quota counts as compute even inside a wait (cpu_throttle.h).
      const DdpIterationStats stats = ddp->last_iteration_stats();
      auto waited = ddp->last_step_agreement_wait() - ddp->last_step_agreement_throttled();
      if (stats.finished > stats.last_gradient) {
        waited += stats.finished - stats.last_gradient - stats.throttled_while_waiting;
      }
      const auto took = Clock::now() - step_start;
      epoch_times.compute_seconds += std::chrono::duration<double>(took - waited).count();
      epoch_times.wait_seconds += std::chrono::duration<double>(waited).count();
      if (balancer) {
        balancer->record_step(std::chrono::duration<double>(took - waited).count(),
                              std::chrono::duration<double>(took).count(), static_cast<int64_t>(chunk.size()));
        if (balancer->due_after_step(++steps_run)) rebalance();
      }
      loss_sum += batch_loss;
      loss_by_sample += batch_loss * static_cast<double>(chunk.size());
      my_samples += static_cast<int64_t>(chunk.size());
      ++batches;
      ++progress.step;
      samples_done = trained_after(step + 1);
      reporter.update(samples_done, batches, batch_loss);
      if (elastic.state) elastic.state->reached(progress.step);
      save_inside_epoch(step);
    }
    reporter.end_epoch();
    // The epoch's training time: until its last step, which for a rank that sits out is when the
    // others hand over their state (an epoch-end cost for those, like evaluation).
    auto training_end = Clock::now();
    if (balancer && balancer->anyone_sits_out()) {
      give_state_to_ranks_sitting_out(steps);
      if (!ddp) training_end = Clock::now();
    }
    const double seconds = std::chrono::duration<double>(training_end - epoch_start).count();
    epoch_times.loop_seconds = seconds;
    epoch_times.samples = my_samples;
    run_times += epoch_times;
    const std::vector<RankTimes> ranks_this_epoch = gather_rank_times(group, epoch_times);
    if (rank == 0) {
      std::fputs(format_rank_table(str_cat("epoch ", epoch + 1), ranks_this_epoch).c_str(), stdout);
    }
    trained_seconds += seconds;
    const int64_t epoch_trained = samples_done - samples_before;
    trained_samples += epoch_trained;
    progress.samples_in_epoch = 0;
    if (balancer && epoch + 1 < o.epochs) rebalance();  // for the next epoch, from this one's measurements
    const double mean_loss = batches ? loss_sum / batches : 0;
    if (my_samples == 0 && balancer && balancer->sits_out(rank)) {
      std::printf("Rank %d, Epoch [%lld/%d]: sat out\n", rank, (long long)epoch + 1, o.epochs);
    } else {
      std::printf("Rank %d, Epoch [%lld/%d], Loss: %.4f\n", rank, (long long)epoch + 1, o.epochs, mean_loss);
    }
    std::fflush(stdout);
    // The epoch's mean loss over all ranks: per batch with equal batches (as always), per
    // sample with --balance (ranks' batches differ in size).
    at::Tensor losses = weighted ? at::tensor({loss_by_sample, static_cast<double>(my_samples)}, at::kDouble)
                                 : at::tensor({mean_loss, 1.0}, at::kDouble);
    group.allreduce(losses, ReduceOp::kSum);
    std::pair<int64_t, int64_t> evaluated;
    {
      TimelineSpan span("evaluate", "train");
      evaluated = evaluate(model, test_set, group, 1000, device);
    }
    const auto [correct, total] = evaluated;
    report.final_loss = losses[1].item<double>() > 0 ? losses[0].item<double>() / losses[1].item<double>() : 0;
    report.test_accuracy = static_cast<double>(correct) / total;
    report.epoch_seconds.push_back(seconds);
    if (rank == 0) {
      std::printf("Test accuracy: %.4f (%lld/%lld)\n", report.test_accuracy, (long long)correct, (long long)total);
      std::fflush(stdout);
      EpochMetrics point;
      point.epoch = static_cast<int>(epoch + 1);
      point.loss = report.final_loss;
      point.test_accuracy = report.test_accuracy;
      point.seconds = seconds;
      point.samples_per_s = epoch_trained / seconds;
      for (const auto& r : ranks_this_epoch) point.rank_samples_per_s.push_back(r.samples_per_second());
      history.push_back(point);
      if (metrics) {
        nlohmann::json line = {{"epoch", epoch + 1},
                               {"loss", report.final_loss},
                               {"test_accuracy", report.test_accuracy},
                               {"seconds", seconds},
                               {"samples_per_s", epoch_trained / seconds},
                               {"ranks", nlohmann::json::parse(rank_times_json(ranks_this_epoch))}};
        if (balancer) line["split"] = balancer->split();
        metrics << line.dump() << "\n";
        metrics.flush();
      }
    }
    progress.epoch = epoch + 1;
    progress.metadata = checkpoint_metadata(o, world);
    if (checkpoints) {
      TimelineSpan span("checkpoint", "train");
      checkpoints->save(model.module(), optimizer.get(), progress, &group);
    }
    if (elastic.state) commit_and_check_membership(progress);
  }
  if (balancer) {
    report.balance = o.balance;
    report.split = balancer->split();
    report.weights = balancer->weights();
  }
  report.samples_per_second = trained_seconds > 0 ? trained_samples / trained_seconds : 0;
  double checksum = 0;
  for (const auto& p : model.module().parameters()) checksum += p.detach().to(at::kDouble).sum().item<double>();
  at::Tensor mine = at::full({1}, checksum, at::kDouble), all = at::empty({world}, at::kDouble);
  group.allgather(mine, all);
  report.parameter_checksums.assign(all.data_ptr<double>(), all.data_ptr<double>() + world);
  report.ranks_json = rank_times_json(gather_rank_times(group, run_times));
  if (!o.timeline_path.empty()) write_gathered_timeline(group, o.timeline_path);
  // After the last collective: a plot that cannot be written fails rank 0 alone, not the others.
  if (rank == 0 && !o.plot_path.empty() && !history.empty()) {
    plot_run(history, o.plot_path, str_cat(o.model, " on ", o.dataset, ", ", world, world == 1 ? " rank" : " ranks"));
    std::printf("[ringtorch] plot: %s\n", o.plot_path.c_str());
  }
  return report;
}

}  // namespace ringtorch
