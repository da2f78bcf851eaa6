// ringtrain: the seeds' training program (DDP on Fashion-MNIST and friends) in C++.
// Flags -> TrainerOptions -> ringtorch::train (apps/trainer/trainer.h).
//   ringrun --standalone --nproc_per_node 2 --use_env ringtrain --model lenet --epochs 3
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/main_guard.h"
#include "apps/trainer/device_selection.h"
#include "apps/trainer/trainer.h"
#include "base/error.h"
#include "base/parse.h"
#include "rendezvous/init_method.h"
#include "rendezvous/rendezvous.h"
#include "runtime/comm/process_group.h"

namespace {

const char kUsage[] =
    "usage: ringtrain [--dataset fashion-mnist|mnist|cifar10|synthetic] [--data-dir DIR]\n"
    "                 [--model mlp|mlp3|lenet|resnet20] [--epochs N] [--batch-size N (per rank)] [--lr X]\n"
    "                 [--momentum X] [--weight-decay X] [--optimizer sgd|adam] [--seed N] [--threads N]\n"
    "                 [--device auto|cpu|cuda|cuda:N] [--gpus ID,ID,... (DataParallel in the process)]\n"
    "                 [--checkpoint-dir DIR] [--resume] [--metrics FILE] [--progress auto|bar|lines|off]\n"
    "                 [--log-interval N] [--init-method URL] [--timeout SECONDS]\n"
    "                 [--config job.json (the same keys without dashes; flags override)]\n"
    "Launch with ringrun, torchrun, or any env:// launch. Prints 'Rank R, Epoch [e/E], Loss: x' per\n"
    "epoch, the test accuracy, and a final JSON line (world size, samples/s, epoch times, loss,\n"
    "accuracy, per-rank parameter checksums).\n";

// Hyperparameters meet float32 parameters: larger values overflow inside LibTorch, whose
// message would not name the flag.
constexpr double kLargestFloat = std::numeric_limits<float>::max();

// Sets one option from its flag name and text value; false for an unknown name.
bool apply(const std::string& arg, const std::string& value, ringtorch::TrainerOptions& o,
           ringtorch::RendezvousOptions& rdzv_options) {
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
    o.lr = ringtorch::parse_number_in_range(value, 0, kLargestFloat, arg);
  } else if (arg == "--momentum") {
    o.momentum = ringtorch::parse_number_in_range(value, 0, kLargestFloat, arg);
  } else if (arg == "--weight-decay") {
    o.weight_decay = ringtorch::parse_number_in_range(value, 0, kLargestFloat, arg);
  } else if (arg == "--optimizer") {
    o.optimizer = value;
  } else if (arg == "--seed") {
    o.seed = static_cast<uint64_t>(ringtorch::parse_int_in_range(value, 0, 1 << 30, arg));
  } else if (arg == "--threads") {
    o.threads = ringtorch::parse_int_in_range(value, 0, 1024, arg);
  } else if (arg == "--checkpoint-dir") {
    o.checkpoint_dir = value;
  } else if (arg == "--resume") {
    if (value != "true" && value != "false")
      throw ringtorch::InvalidArgumentError(arg + " " + value + ": use true or false");
    o.resume = value == "true";
  } else if (arg == "--metrics") {
    o.metrics_path = value;
  } else if (arg == "--device") {
    o.device = value;
  } else if (arg == "--gpus") {
    o.gpus = ringtorch::parse_device_ids(value);
  } else if (arg == "--progress") {
    o.progress = value;
  } else if (arg == "--log-interval") {
    o.log_interval = ringtorch::parse_int_in_range(value, 0, 1 << 30, arg);
  } else if (arg == "--init-method") {
    rdzv_options.init_method = value;
  } else if (arg == "--timeout") {
    rdzv_options.timeout = ringtorch::parse_seconds(value, arg);
  } else {
    return false;
  }
  return true;
}

// A JSON object whose keys are the flags without their dashes ({"model": "lenet", "lr": 0.01,
// "resume": true}); every error names the file, the key and the value.
void apply_config(const std::string& path, ringtorch::TrainerOptions& o, ringtorch::RendezvousOptions& rdzv_options) {
  std::ifstream in(path);
  if (!in) throw ringtorch::IoError("--config " + path + ": cannot read it");
  nlohmann::json config;
  // A job config is flat (a list at most); deeper values are refused while parsing, before
  // anything recurses over them (nlohmann's dump() of a value 100000 deep overflowed the stack).
  constexpr int kMaxDepth = 8;
  auto limit_depth = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxDepth) {
      throw ringtorch::InvalidArgumentError("--config " + path + ": values nest deeper than " +
                                            std::to_string(kMaxDepth) + " levels; a job config is flat");
    }
    return true;
  };
  try {
    config = nlohmann::json::parse(in, limit_depth);
  } catch (const ringtorch::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw ringtorch::InvalidArgumentError("--config " + path + ": not valid JSON (" + e.what() + ")");
  }
  if (!config.is_object()) throw ringtorch::InvalidArgumentError("--config " + path + ": must be a JSON object");
  for (const auto& [key, value] : config.items()) {
    std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    if (value.is_array()) {  // "gpus": [0, 1] means --gpus 0,1
      text.clear();
      for (const auto& item : value) text += (text.empty() ? "" : ",") + item.dump();
    }
    try {
      if (value.is_object() || value.is_null() || !apply("--" + key, text, o, rdzv_options)) {
        throw ringtorch::InvalidArgumentError(
            "unknown key or value of the wrong kind; keys are ringtrain's flags "
            "without dashes (see ringtrain --help)");
      }
    } catch (const ringtorch::Error& e) {
      throw ringtorch::InvalidArgumentError("--config " + path + ": key '" + key + "' = " + value.dump() + ": " +
                                            e.what());
    }
  }
}

int run(int argc, char** argv) {
  ringtorch::TrainerOptions o;
  ringtorch::RendezvousOptions rdzv_options;
  // The config file first, so that flags override it wherever they stand.
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--config") apply_config(argv[i + 1], o, rdzv_options);
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
    if (!apply(arg, value, o, rdzv_options)) {
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
  return ringtorch::run_reporting_errors("ringtrain", [&] { return run(argc, argv); });
}
