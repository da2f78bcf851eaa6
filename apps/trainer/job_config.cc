#include "apps/trainer/job_config.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>

#include <ringtorch/error.h>

#include "apps/trainer/device_selection.h"
#include "apps/trainer/grad_compression_flag.h"
#include "base/command_line.h"
#include "base/parse.h"
#include "base/small_file.h"

namespace ringtorch {
namespace {

// Hyperparameters meet float32 parameters: larger values overflow inside LibTorch, whose
// message would not name the flag.
constexpr double kLargestFloat = std::numeric_limits<float>::max();

// A job config is flat (a list at most); deeper values are refused while parsing, before
// anything recurses over them (nlohmann's dump() of a value 100000 deep overflowed the stack).
constexpr int kMaxDepth = 8;

// A job config is a page of flags; a file far larger is another file named by mistake.
constexpr size_t kMaxJobConfigBytes = 1 << 20;

}  // namespace

namespace {

// One of ringtrain's flags: how its text value sets the options. `boolean`: on the command line
// it is a flag (--resume, --resume=false); in a config, true or false.
struct TrainerFlag {
  const char* name;
  bool boolean;
  std::function<void(const std::string& value, TrainerOptions&, RendezvousOptions&)> set;
};

bool parse_bool(const std::string& flag, const std::string& value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  throw InvalidArgumentError(flag + " " + value + ": use true or false");
}

// Every flag of ringtrain (and key of its job config), in the order the usage lists them.
const std::vector<TrainerFlag>& trainer_flags() {
  using O = TrainerOptions;
  using R = RendezvousOptions;
  static const std::vector<TrainerFlag> flags = {
      {"--dataset", false, [](const std::string& v, O& o, R&) { o.dataset = v; }},
      {"--data-dir", false, [](const std::string& v, O& o, R&) { o.data_dir = v; }},
      {"--model", false, [](const std::string& v, O& o, R&) { o.model = v; }},
      {"--epochs", false,
       [](const std::string& v, O& o, R&) { o.epochs = parse_int_in_range(v, 1, 1 << 20, "--epochs"); }},
      {"--batch-size", false,
       [](const std::string& v, O& o, R&) { o.batch_size = parse_int_in_range(v, 1, 1 << 20, "--batch-size"); }},
      {"--balance", false, [](const std::string& v, O& o, R&) { o.balance = v; }},
      {"--max-train-samples", false,
       [](const std::string& v, O& o, R&) {
         o.max_train_samples = parse_int_in_range(v, 1, 1 << 30, "--max-train-samples");
       }},
      {"--global-batch", false,
       [](const std::string& v, O& o, R&) { o.global_batch = parse_int_in_range(v, 1, 1 << 30, "--global-batch"); }},
      {"--lr", false,
       [](const std::string& v, O& o, R&) { o.lr = parse_number_in_range(v, 0, kLargestFloat, "--lr"); }},
      {"--momentum", false,
       [](const std::string& v, O& o, R&) { o.momentum = parse_number_in_range(v, 0, kLargestFloat, "--momentum"); }},
      {"--weight-decay", false,
       [](const std::string& v, O& o, R&) {
         o.weight_decay = parse_number_in_range(v, 0, kLargestFloat, "--weight-decay");
       }},
      {"--optimizer", false, [](const std::string& v, O& o, R&) { o.optimizer = v; }},
      {"--seed", false,
       [](const std::string& v, O& o, R&) {
         o.seed = static_cast<uint64_t>(parse_int_in_range(v, 0, 1 << 30, "--seed"));
       }},
      {"--threads", false,
       [](const std::string& v, O& o, R&) { o.threads = parse_int_in_range(v, 0, 1024, "--threads"); }},
      {"--device", false, [](const std::string& v, O& o, R&) { o.device = v; }},
      {"--gpus", false, [](const std::string& v, O& o, R&) { o.gpus = parse_device_ids(v); }},
      {"--grad-compression", false,
       [](const std::string& v, O& o, R&) {
         parse_grad_compression(v);
         o.grad_compression = v;
       }},
      {"--powersgd-start-step", false,
       [](const std::string& v, O& o, R&) {
         o.powersgd_start_step = parse_int_in_range(v, 0, 1 << 30, "--powersgd-start-step");
       }},
      {"--local-steps", false,
       [](const std::string& v, O& o, R&) { o.local_steps = parse_int_in_range(v, 1, 1 << 20, "--local-steps"); }},
      {"--outer-lr", false,
       [](const std::string& v, O& o, R&) {
         o.outer_lr = parse_number_in_range(v, 0, kLargestFloat, "--outer-lr");
         if (o.outer_lr == 0) throw InvalidArgumentError("--outer-lr " + v + ": must be positive");
       }},
      {"--outer-momentum", false,
       [](const std::string& v, O& o, R&) {
         o.outer_momentum = parse_number_in_range(v, 0, 1, "--outer-momentum");
         if (o.outer_momentum == 1) throw InvalidArgumentError("--outer-momentum " + v + ": must be below 1");
       }},
      {"--outer-compression", false,
       [](const std::string& v, O& o, R&) {
         if (v != "none" && v != "bf16") throw InvalidArgumentError("--outer-compression " + v + ": use none or bf16");
         o.outer_compression = v;
       }},
      {"--outer-overlap", false,
       [](const std::string& v, O& o, R&) { o.outer_overlap = parse_int_in_range(v, 0, 1 << 20, "--outer-overlap"); }},
      {"--checkpoint-dir", false, [](const std::string& v, O& o, R&) { o.checkpoint_dir = v; }},
      {"--checkpoint-every-steps", false,
       [](const std::string& v, O& o, R&) {
         o.checkpoint_every_steps = parse_int_in_range(v, 0, 1 << 30, "--checkpoint-every-steps");
       }},
      {"--init-from", false, [](const std::string& v, O& o, R&) { o.init_from = v; }},
      {"--resume", true, [](const std::string& v, O& o, R&) { o.resume = parse_bool("--resume", v); }},
      {"--allow-non-finite", true,
       [](const std::string& v, O& o, R&) { o.allow_non_finite = parse_bool("--allow-non-finite", v); }},
      {"--elastic", false,
       [](const std::string& v, O& o, R&) {
         if (v != "restart" && v != "in-process")
           throw InvalidArgumentError("--elastic " + v + ": use restart or in-process");
         o.elastic = v;
       }},
      {"--commit-every-steps", false,
       [](const std::string& v, O& o, R&) {
         o.commit_every_steps = parse_int_in_range(v, 1, 1 << 30, "--commit-every-steps");
       }},
      {"--metrics", false, [](const std::string& v, O& o, R&) { o.metrics_path = v; }},
      {"--progress", false, [](const std::string& v, O& o, R&) { o.progress = v; }},
      {"--timeline", false, [](const std::string& v, O& o, R&) { o.timeline_path = v; }},
      {"--plot", false, [](const std::string& v, O& o, R&) { o.plot_path = v; }},
      {"--log-interval", false,
       [](const std::string& v, O& o, R&) { o.log_interval = parse_int_in_range(v, 0, 1 << 30, "--log-interval"); }},
      {"--init-method", false, [](const std::string& v, O&, R& r) { r.init_method = v; }},
      {"--timeout", false, [](const std::string& v, O&, R& r) { r.timeout = parse_seconds(v, "--timeout"); }},
  };
  return flags;
}

}  // namespace

bool apply_trainer_flag(const std::string& arg, const std::string& value, TrainerOptions& o,
                        RendezvousOptions& rdzv_options) {
  std::string name = arg;
  std::replace(name.begin(), name.end(), '_', '-');  // --batch_size is --batch-size
  for (const TrainerFlag& flag : trainer_flags()) {
    if (name != flag.name) continue;
    flag.set(value, o, rdzv_options);
    return true;
  }
  return false;
}

bool parse_trainer_command_line(const std::vector<std::string>& args, const std::string& usage, TrainerOptions& o,
                                RendezvousOptions& rdzv_options) {
  CommandLine cli("ringtrain", usage);
  // Declared first, so applied first: every flag then overrides the file, wherever it stands.
  cli.repeatable("--config", [&](const std::string& path) { apply_job_config_file(path, o, rdzv_options); });
  for (const TrainerFlag& flag : trainer_flags()) {
    if (flag.boolean) {
      cli.flag(flag.name, [&](bool on) { flag.set(on ? "true" : "false", o, rdzv_options); });
    } else {
      cli.option(flag.name, [&](const std::string& v) { flag.set(v, o, rdzv_options); });
    }
  }
  cli.ignored("--local_rank");  // torch.distributed.launch's; LOCAL_RANK says the same
  return cli.parse(args);
}

void apply_job_config(const std::string& text, const std::string& source, TrainerOptions& o,
                      RendezvousOptions& rdzv_options) {
  auto limit_depth = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxDepth) {
      throw InvalidArgumentError("--config " + source + ": values nest deeper than " + std::to_string(kMaxDepth) +
                                 " levels; a job config is flat");
    }
    return true;
  };
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(text, limit_depth);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw InvalidArgumentError("--config " + source + ": not valid JSON (" + e.what() + ")");
  }
  if (!config.is_object()) throw InvalidArgumentError("--config " + source + ": must be a JSON object");
  for (const auto& [key, value] : config.items()) {
    std::string text_value = value.is_string() ? value.get<std::string>() : value.dump();
    if (value.is_array()) {  // "gpus": [0, 1] means --gpus 0,1
      text_value.clear();
      for (const auto& item : value) text_value += (text_value.empty() ? "" : ",") + item.dump();
    }
    try {
      if (value.is_object() || value.is_null() || !apply_trainer_flag("--" + key, text_value, o, rdzv_options)) {
        throw InvalidArgumentError(
            "unknown key or value of the wrong kind; keys are ringtrain's flags "
            "without their leading dashes (see ringtrain --help)");
      }
    } catch (const Error& e) {
      throw InvalidArgumentError("--config " + source + ": key '" + key + "' = " + value.dump() + ": " + e.what());
    }
  }
}

void apply_job_config_file(const std::string& path, TrainerOptions& o, RendezvousOptions& rdzv_options) {
  apply_job_config(read_small_file(path, kMaxJobConfigBytes, "--config"), path, o, rdzv_options);
}

}  // namespace ringtorch
