#include "apps/trainer/job_config.h"

#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>

#include "apps/trainer/device_selection.h"
#include "base/error.h"
#include "base/parse.h"

namespace ringtorch {
namespace {

// Hyperparameters meet float32 parameters: larger values overflow inside LibTorch, whose
// message would not name the flag.
constexpr double kLargestFloat = std::numeric_limits<float>::max();

// A job config is flat (a list at most); deeper values are refused while parsing, before
// anything recurses over them (nlohmann's dump() of a value 100000 deep overflowed the stack).
constexpr int kMaxDepth = 8;

}  // namespace

bool apply_trainer_flag(const std::string& arg, const std::string& value, TrainerOptions& o,
                        RendezvousOptions& rdzv_options) {
  if (arg == "--dataset") {
    o.dataset = value;
  } else if (arg == "--data-dir") {
    o.data_dir = value;
  } else if (arg == "--model") {
    o.model = value;
  } else if (arg == "--epochs") {
    o.epochs = parse_int_in_range(value, 1, 1 << 20, arg);
  } else if (arg == "--batch-size") {
    o.batch_size = parse_int_in_range(value, 1, 1 << 20, arg);
  } else if (arg == "--balance") {
    o.balance = value;
  } else if (arg == "--max-train-samples") {
    o.max_train_samples = parse_int_in_range(value, 1, 1 << 30, arg);
  } else if (arg == "--global-batch") {
    o.global_batch = parse_int_in_range(value, 1, 1 << 30, arg);
  } else if (arg == "--lr") {
    o.lr = parse_number_in_range(value, 0, kLargestFloat, arg);
  } else if (arg == "--momentum") {
    o.momentum = parse_number_in_range(value, 0, kLargestFloat, arg);
  } else if (arg == "--weight-decay") {
    o.weight_decay = parse_number_in_range(value, 0, kLargestFloat, arg);
  } else if (arg == "--optimizer") {
    o.optimizer = value;
  } else if (arg == "--seed") {
    o.seed = static_cast<uint64_t>(parse_int_in_range(value, 0, 1 << 30, arg));
  } else if (arg == "--threads") {
    o.threads = parse_int_in_range(value, 0, 1024, arg);
  } else if (arg == "--checkpoint-dir") {
    o.checkpoint_dir = value;
  } else if (arg == "--checkpoint-every-steps") {
    o.checkpoint_every_steps = parse_int_in_range(value, 0, 1 << 30, arg);
  } else if (arg == "--elastic") {
    if (value != "restart" && value != "in-process") {
      throw InvalidArgumentError(arg + " " + value + ": use restart or in-process");
    }
    o.elastic = value;
  } else if (arg == "--commit-every-steps") {
    o.commit_every_steps = parse_int_in_range(value, 1, 1 << 30, arg);
  } else if (arg == "--resume") {
    if (value != "true" && value != "false") throw InvalidArgumentError(arg + " " + value + ": use true or false");
    o.resume = value == "true";
  } else if (arg == "--metrics") {
    o.metrics_path = value;
  } else if (arg == "--timeline") {
    o.timeline_path = value;
  } else if (arg == "--plot") {
    o.plot_path = value;
  } else if (arg == "--device") {
    o.device = value;
  } else if (arg == "--gpus") {
    o.gpus = parse_device_ids(value);
  } else if (arg == "--progress") {
    o.progress = value;
  } else if (arg == "--log-interval") {
    o.log_interval = parse_int_in_range(value, 0, 1 << 30, arg);
  } else if (arg == "--init-method") {
    rdzv_options.init_method = value;
  } else if (arg == "--timeout") {
    rdzv_options.timeout = parse_seconds(value, arg);
  } else {
    return false;
  }
  return true;
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
            "without dashes (see ringtrain --help)");
      }
    } catch (const Error& e) {
      throw InvalidArgumentError("--config " + source + ": key '" + key + "' = " + value.dump() + ": " + e.what());
    }
  }
}

void apply_job_config_file(const std::string& path, TrainerOptions& o, RendezvousOptions& rdzv_options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("--config " + path + ": cannot read it");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  apply_job_config(text, path, o, rdzv_options);
}

}  // namespace ringtorch
