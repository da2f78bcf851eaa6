// ringtrain: the seeds' training program (DDP on Fashion-MNIST and friends) in C++.
// Flags -> TrainerOptions -> ringtorch::train (apps/trainer/trainer.h).
//   ringrun --standalone --nproc_per_node 2 --use_env ringtrain --model lenet --epochs 3
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <ringtorch/elastic_worker.h>
#include <ringtorch/error.h>
#include <ringtorch/keep_freed_memory.h>
#include <ringtorch/process_group.h>
#include <ringtorch/rendezvous.h>
#include <ringtorch/timeline.h>

#include "apps/main_guard.h"
#include "apps/trainer/job_config.h"
#include "apps/trainer/trainer.h"

namespace {

const char kUsage[] =
    "usage: ringtrain [--dataset fashion-mnist|mnist|cifar10|synthetic] [--data-dir DIR]\n"
    "                 [--model mlp|mlp3|lenet|resnet20] [--epochs N] [--batch-size N (per rank)] [--lr X]\n"
    "                 [--momentum X] [--weight-decay X] [--optimizer sgd|adam] [--seed N] [--threads N]\n"
    "                 [--device auto|cpu|cuda|cuda:N] [--gpus ID,ID,... (DataParallel in the process)]\n"
    "                 [--grad-compression none|fp16|bf16|powersgd[:RANK] (how gradients travel; default none)]\n"
    "                 [--powersgd-start-step N (plain all-reduce before PowerSGD starts; default 2)]\n"
    "                 [--local-steps H (local SGD: H inner steps per rank between outer steps; default off: DDP)]\n"
    "                 [--outer-lr X (default 0.7)] [--outer-momentum X (Nesterov; default 0.9)]\n"
    "                 [--outer-compression none|bf16 (the outer gradient's all-reduce; default none)]\n"
    "                 [--outer-overlap N (the outer all-reduce travels during N inner steps; default 0)]\n"
    "                 [--checkpoint-dir DIR] [--checkpoint-every-steps N] [--resume]\n"
    "                 [--init-from FILE.pt (a state_dict saved by Python's torch.save, or a checkpoint)]\n"
    "                 [--allow-non-finite (train on past a NaN or inf loss instead of stopping)]\n"
    "                 [--elastic restart|in-process] [--commit-every-steps N (in-process: default 10)]\n"
    "                 [--metrics FILE] [--progress auto|bar|lines|off]\n"
    "                 [--timeline FILE (Chrome trace of every rank)] [--plot FILE.svg (loss, accuracy, samples/s)]\n"
    "                 [--log-interval N] [--init-method URL] [--timeout SECONDS]\n"
    "                 [--balance equal|auto|dynamic|W0:W1:... (per-rank batches for ranks of unequal speed;\n"
    "                  dynamic: with --local-steps, batches handed out as ranks ask)]\n"
    "                 [--global-batch N (with --balance; default batch-size x world size)]\n"
    "                 [--max-train-samples N (the first N training images only)]\n"
    "                 [--config job.json (the same keys without dashes; flags override)]\n"
    "Every flag takes --flag VALUE or --flag=VALUE, with dashes or underscores (--batch_size);\n"
    "--resume and --allow-non-finite also take =true or =false. -h, --help: this text.\n"
    "Launch with ringrun, torchrun, or any env:// launch. Prints 'Rank R, Epoch [e/E], Loss: x' per\n"
    "epoch, the test accuracy, a per-rank table (samples/s, compute, communication wait), and a final\n"
    "JSON line (world size, samples/s, epoch times, loss, accuracy, per-rank times and parameter\n"
    "checksums).\n";

// --elastic in-process: when a peer is lost (or a node joins), the ranks that are left drop
// their group, wait for the next generation of the elastic ringrun, make a new group and go on
// from the newest state any of them committed (Note [In-process recovery], docs/ARCHITECTURE.md).
int train_recovering_in_process(const ringtorch::TrainerOptions& o, const ringtorch::RendezvousOptions& options,
                                ringtorch::Rendezvous rdzv, std::shared_ptr<ringtorch::ProcessGroup> group) {
  ringtorch::ElasticState state;
  ringtorch::ElasticHooks::Datasets datasets;      // read once, kept across recoveries
  ringtorch::RendezvousOptions current = options;  // the next generation's rank and world size, once there is one
  while (true) {
    auto worker = ringtorch::ElasticWorker::from_environment(rdzv, current.env);
    if (!worker) {
      throw ringtorch::InvalidArgumentError(
          "--elastic in-process needs an elastic ringrun (RINGTORCH_ELASTIC_RUN is not set): launch with ringrun "
          "--nnodes N or MIN:MAX, or drop --elastic in-process");
    }
    const std::string who = rdzv.describe();
    try {
      ringtorch::ElasticHooks hooks{&state, o.commit_every_steps, [&] { return worker->generation_ended(); },
                                    &datasets};
      const auto report = ringtorch::train(o, *group, hooks);
      if (group->rank() == 0) std::printf("%s\n", report.to_json().c_str());
      return 0;
    } catch (const ringtorch::MembershipChanged& e) {
      std::printf("[ringtorch] %sgeneration %d: %s; making a new group in this process\n", who.c_str(),
                  worker->generation(), e.what());
    } catch (const ringtorch::Error& e) {
      if (e.kind() != ringtorch::ErrorKind::kPeerLost && e.kind() != ringtorch::ErrorKind::kTimeout) throw;
      const std::string what = e.what();
      const std::string first_line = what.substr(0, what.find('\n'));
      std::printf("[ringtorch] %slost a peer at step %lld (last commit: step %lld), recovering in this process: %s\n",
                  who.c_str(), (long long)state.reached_step(), (long long)state.committed_step(), first_line.c_str());
      worker->report_lost(ringtorch::str_cat(who, "lost a peer: ", first_line.substr(0, 300)));
    }
    std::fflush(stdout);
    group->shutdown();
    group.reset();
    // The agents' rendezvous ends by itself (its --rdzv_conf join_timeout, 600 s by default, or
    // the job's end); this bound only keeps a worker whose ringrun vanished from waiting forever.
    const auto wait = rdzv.timeout + std::chrono::minutes(20);
    current = worker->next_generation(options, wait);
    rdzv = ringtorch::rendezvous(current);
    group = ringtorch::ProcessGroup::create(rdzv);
  }
}

int run(const ringtorch::TrainerOptions& o, const ringtorch::RendezvousOptions& rdzv_options) {
  if (!o.timeline_path.empty()) ringtorch::Timeline::start();
  std::optional<ringtorch::TimelineSpan> span(std::in_place, "rendezvous", "setup");
  auto rdzv = ringtorch::rendezvous(rdzv_options);
  span.emplace("process group", "setup");  // the rendezvous' span ends, the group's begins
  span->set_args("{\"restart\":" + std::to_string(rdzv.restart) + "}");
  auto group = ringtorch::ProcessGroup::create(rdzv);
  span.reset();
  // Freed tensors' pages stay for the next step's (<ringtorch/keep_freed_memory.h>). After the
  // group, whose threads then wait on their sockets: called before it, the same settings kept
  // fewer pages (docs/training.md, "Memory the process keeps").
  ringtorch::keep_freed_memory();
  if (o.elastic == "in-process") return train_recovering_in_process(o, rdzv_options, std::move(rdzv), std::move(group));
  const auto report = ringtorch::train(o, *group);
  if (group->rank() == 0) std::printf("%s\n", report.to_json().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ringtorch::TrainerOptions o;
  ringtorch::RendezvousOptions rdzv_options;
  // Bad flags exit 2 before anything starts, on every rank (base/command_line.h).
  try {
    if (!ringtorch::parse_trainer_command_line(std::vector<std::string>(argv + 1, argv + argc), kUsage, o,
                                               rdzv_options)) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    ringtorch::validate(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringtrain: %s\n", e.what());
    return 2;
  }
  return ringtorch::run_reporting_errors("ringtrain", [&] { return run(o, rdzv_options); });
}
