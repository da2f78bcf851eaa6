// ringtrain: the seeds' training program (DDP on Fashion-MNIST and friends) in C++.
// Flags -> TrainerOptions -> ringtorch::train (apps/trainer/trainer.h).
//   ringrun --standalone --nproc_per_node 2 --use_env ringtrain --model lenet --epochs 3
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "apps/main_guard.h"
#include "apps/trainer/job_config.h"
#include "apps/trainer/trainer.h"
#include "base/error.h"
#include "base/keep_freed_memory.h"
#include "rendezvous/elastic_worker.h"
#include "rendezvous/rendezvous.h"
#include "runtime/comm/process_group.h"
#include "runtime/trace/timeline.h"

namespace {

const char kUsage[] =
    "usage: ringtrain [--dataset fashion-mnist|mnist|cifar10|synthetic] [--data-dir DIR]\n"
    "                 [--model mlp|mlp3|lenet|resnet20] [--epochs N] [--batch-size N (per rank)] [--lr X]\n"
    "                 [--momentum X] [--weight-decay X] [--optimizer sgd|adam] [--seed N] [--threads N]\n"
    "                 [--device auto|cpu|cuda|cuda:N] [--gpus ID,ID,... (DataParallel in the process)]\n"
    "                 [--checkpoint-dir DIR] [--checkpoint-every-steps N] [--resume]\n"
    "                 [--elastic restart|in-process] [--commit-every-steps N (in-process: default 10)]\n"
    "                 [--metrics FILE] [--progress auto|bar|lines|off]\n"
    "                 [--timeline FILE (Chrome trace of every rank)] [--plot FILE.svg (loss, accuracy, samples/s)]\n"
    "                 [--log-interval N] [--init-method URL] [--timeout SECONDS]\n"
    "                 [--balance equal|auto|W0:W1:... (per-rank batches for ranks of unequal speed)]\n"
    "                 [--global-batch N (with --balance; default batch-size x world size)]\n"
    "                 [--max-train-samples N (the first N training images only)]\n"
    "                 [--config job.json (the same keys without dashes; flags override)]\n"
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

int run(int argc, char** argv) {
  ringtorch::TrainerOptions o;
  ringtorch::RendezvousOptions rdzv_options;
  // The config file first, so that flags override it wherever they stand.
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--config") ringtorch::apply_job_config_file(argv[i + 1], o, rdzv_options);
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--resume") {
      o.resume = true;
      continue;
    }
    if (arg == "--local_rank" || arg.rfind("--local_rank=", 0) == 0 || arg.rfind("--local-rank=", 0) == 0) {
      if (arg == "--local_rank") ++i;  // torch.distributed.launch's legacy flag: LOCAL_RANK says the same
      continue;
    }
    if (i + 1 >= argc) throw ringtorch::InvalidArgumentError(arg + " needs a value; see ringtrain --help");
    const std::string value = argv[++i];
    if (arg == "--config") continue;  // applied above
    if (!ringtorch::apply_trainer_flag(arg, value, o, rdzv_options)) {
      throw ringtorch::InvalidArgumentError("unknown argument '" + arg + "'; see ringtrain --help");
    }
  }
  ringtorch::validate(o);  // before the rendezvous: a bad flag fails fast on every rank
  if (!o.timeline_path.empty()) ringtorch::Timeline::start();
  std::optional<ringtorch::TimelineSpan> span(std::in_place, "rendezvous", "setup");
  auto rdzv = ringtorch::rendezvous(rdzv_options);
  span.emplace("process group", "setup");  // the rendezvous' span ends, the group's begins
  span->set_args("{\"restart\":" + std::to_string(rdzv.restart) + "}");
  auto group = ringtorch::ProcessGroup::create(rdzv);
  span.reset();
  // Freed tensors' pages stay for the next step's (base/keep_freed_memory.h). After the group:
  // called before it, the same settings left 381k page faults in a lenet run instead of 142k.
  ringtorch::keep_freed_memory();
  if (o.elastic == "in-process") return train_recovering_in_process(o, rdzv_options, std::move(rdzv), std::move(group));
  const auto report = ringtorch::train(o, *group);
  if (group->rank() == 0) std::printf("%s\n", report.to_json().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ringtorch::run_reporting_errors("ringtrain", [&] { return run(argc, argv); });
}
