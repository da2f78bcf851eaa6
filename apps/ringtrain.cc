// ringtrain: the seeds' training program (DDP on Fashion-MNIST and friends) in C++.
// Flags -> TrainerOptions -> ringtorch::train (apps/trainer/trainer.h).
//   ringrun --standalone --nproc_per_node 2 --use_env ringtrain --model lenet --epochs 3
#include <cstdio>
#include <string>

#include "apps/trainer/trainer.h"
#include "rendezvous/error.h"
#include "rendezvous/init_method.h"
#include "rendezvous/rendezvous.h"
#include "runtime/comm/process_group.h"

namespace {

const char kUsage[] =
    "usage: ringtrain [--dataset fashion-mnist|mnist|synthetic] [--data-dir DIR] [--model mlp|mlp3|lenet]\n"
    "                 [--epochs N] [--batch-size N (per rank)] [--lr X] [--momentum X] [--weight-decay X]\n"
    "                 [--optimizer sgd|adam] [--seed N] [--threads N] [--checkpoint-dir DIR] [--resume]\n"
    "                 [--metrics FILE] [--log-interval N] [--init-method URL] [--timeout SECONDS]\n"
    "Launch with ringrun, torchrun, or any env:// launch. Prints 'Rank R, Epoch [e/E], Loss: x' per\n"
    "epoch, the test accuracy, and a final JSON line (world size, samples/s, epoch times, loss,\n"
    "accuracy, per-rank parameter checksums).\n";

int run(int argc, char** argv) {
  ringtorch::TrainerOptions o;
  ringtorch::RendezvousOptions rdzv_options;
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
    if (arg == "--dataset") {
      o.dataset = value;
    } else if (arg == "--data-dir") {
      o.data_dir = value;
    } else if (arg == "--model") {
      o.model = value;
    } else if (arg == "--epochs") {
      o.epochs = ringtorch::parse_int_in_range(value, 1, 1 << 20, arg);
    } else if (arg == "--batch-size") {
      o.batch_size = ringtorch::parse_int_in_range(value, 1, 1 << 20, arg);
    } else if (arg == "--lr") {
      o.lr = ringtorch::parse_number(value, arg);
    } else if (arg == "--momentum") {
      o.momentum = ringtorch::parse_number(value, arg);
    } else if (arg == "--weight-decay") {
      o.weight_decay = ringtorch::parse_number(value, arg);
    } else if (arg == "--optimizer") {
      o.optimizer = value;
    } else if (arg == "--seed") {
      o.seed = static_cast<uint64_t>(ringtorch::parse_int_in_range(value, 0, 1 << 30, arg));
    } else if (arg == "--threads") {
      o.threads = ringtorch::parse_int_in_range(value, 0, 1024, arg);
    } else if (arg == "--checkpoint-dir") {
      o.checkpoint_dir = value;
    } else if (arg == "--metrics") {
      o.metrics_path = value;
    } else if (arg == "--log-interval") {
      o.log_interval = ringtorch::parse_int_in_range(value, 0, 1 << 30, arg);
    } else if (arg == "--init-method") {
      rdzv_options.init_method = value;
    } else if (arg == "--timeout") {
      rdzv_options.timeout = ringtorch::parse_seconds(value, arg);
    } else {
      throw ringtorch::InvalidArgumentError("unknown argument '" + arg + "'; see ringtrain --help");
    }
  }
  ringtorch::validate(o);  // before the rendezvous: a bad flag fails fast on every rank
  auto rdzv = ringtorch::rendezvous(rdzv_options);
  auto group = ringtorch::ProcessGroup::create(rdzv);
  const auto report = ringtorch::train(o, *group);
  if (group->rank() == 0) std::printf("%s\n", report.to_json().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringtrain: %s\n", e.what());
    return 1;
  }
}
