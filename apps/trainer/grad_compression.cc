#include "apps/trainer/grad_compression.h"

#include <torch/torch.h>

#include <vector>

#include <ringtorch/error.h>

#include "base/log.h"

namespace ringtorch {
namespace {

constexpr char kPrefix[] = "powersgd.";

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// The entries of `saved` that are PowerSGD's, without the prefix.
std::map<std::string, at::Tensor> powersgd_entries(const std::map<std::string, at::Tensor>& saved) {
  std::map<std::string, at::Tensor> entries;
  for (const auto& [name, tensor] : saved) {
    if (starts_with(name, kPrefix)) entries[name.substr(sizeof(kPrefix) - 1)] = tensor;
  }
  return entries;
}

}  // namespace

CommHook make_comm_hook(const GradCompression& choice, int64_t powersgd_start_step,
                        std::shared_ptr<PowerSgdState>* powersgd) {
  powersgd->reset();
  if (choice.kind == "fp16") return fp16_compress_hook();
  if (choice.kind == "bf16") return bf16_compress_hook();
  if (choice.kind == "powersgd") {
    PowerSgdOptions options;
    options.matrix_approximation_rank = choice.rank;
    options.start_step = powersgd_start_step;
    *powersgd = std::make_shared<PowerSgdState>(options);
    return powersgd_hook(*powersgd);
  }
  return allreduce_hook();
}

std::map<std::string, at::Tensor> powersgd_checkpoint_state(const PowerSgdState& state, ProcessGroup& group) {
  std::map<std::string, at::Tensor> saved;
  std::vector<std::pair<std::string, at::Tensor>> errors;  // in name order, alike on every rank
  for (const auto& [name, tensor] : state.state_dict()) {
    if (starts_with(name, "error.")) {
      errors.emplace_back(name.substr(6), tensor.reshape({-1}));
    } else {
      saved[kPrefix + name] = tensor;
    }
  }
  // Every rank's errors to rank 0, as rows: the same sizes on every rank, unless some rank has
  // not yet made its buffers (one that sat out with --balance).
  int64_t total = 0;
  for (const auto& [bucket, error] : errors) total += error.numel();
  at::Tensor totals = at::tensor({total, -total}, at::kLong);
  group.allreduce(totals, ReduceOp::kMax);
  if (totals[0].item<int64_t>() != total || -totals[1].item<int64_t>() != total) {
    if (group.rank() == 0) {
      log_warning(
          "PowerSGD's error buffers differ in size across ranks (a rank sat out): this checkpoint keeps "
          "its Q and step, and a resume starts the errors from zero");
    }
    return saved;
  }
  if (total == 0) return saved;
  // In the errors' own dtype (float64 models resume exactly too); buckets of mixed dtypes in float64.
  at::ScalarType dtype = errors.front().second.scalar_type();
  for (const auto& [bucket, error] : errors) {
    if (error.scalar_type() != dtype) dtype = at::kDouble;
  }
  std::vector<at::Tensor> pieces;
  for (const auto& [bucket, error] : errors) pieces.push_back(error.to(dtype));
  at::Tensor mine = at::cat(pieces);
  at::Tensor all = group.rank() == 0 ? at::empty({group.size(), total}, dtype) : at::Tensor();
  group.gather(mine, group.rank() == 0 ? all.view({-1}) : all, /*root=*/0);
  if (group.rank() != 0) return saved;
  int64_t offset = 0;
  for (const auto& [bucket, error] : errors) {
    saved[str_cat(kPrefix, "errors.", bucket)] = all.narrow(1, offset, error.numel()).clone();
    offset += error.numel();
  }
  return saved;
}

std::string restore_powersgd_from_checkpoint(PowerSgdState& state, const std::map<std::string, at::Tensor>& saved,
                                             int rank, int world) {
  const auto entries = powersgd_entries(saved);
  if (entries.empty()) {
    state.load_state_dict({});
    return str_cat(
        "PowerSGD: the checkpoint holds no PowerSGD state; it starts afresh (plain all-reduce for the first ",
        state.options().start_step, " steps)");
  }
  std::map<std::string, at::Tensor> own;
  std::string note;
  bool any_errors = false;
  for (const auto& [name, tensor] : entries) {
    if (!starts_with(name, "errors.")) {
      own[name] = tensor;
      continue;
    }
    any_errors = true;
    if (tensor.dim() != 2 || tensor.size(0) < 1) {
      throw InvalidArgumentError(str_cat("[rank ", rank, "/", world, "] resuming PowerSGD: checkpoint entry 'powersgd.",
                                         name,
                                         "' is not one row per rank (a damaged or foreign checkpoint; resume from "
                                         "another, or without --grad-compression powersgd)"));
    }
    const std::string bucket = name.substr(7);
    if (tensor.size(0) == world) {
      own["error." + bucket] = tensor[rank];
    } else {
      own["error." + bucket] = tensor.mean(0);
      note = str_cat("PowerSGD: the checkpoint's error buffers are from ", tensor.size(0), " ranks; each of the ",
                     world, " ranks starts from their mean");
    }
  }
  try {
    state.load_state_dict(own);
  } catch (const InvalidArgumentError& e) {  // the library's message names the entry, not the rank or flag
    throw InvalidArgumentError(str_cat("[rank ", rank, "/", world, "] resuming PowerSGD: ", e.what(),
                                       " (a damaged or foreign checkpoint; resume from another, or without "
                                       "--grad-compression powersgd)"));
  }
  if (!any_errors && state.step() > state.options().start_step) {
    note = "PowerSGD: the checkpoint holds no error buffers; they start from zero";
  }
  return note;
}

std::map<std::string, at::Tensor> powersgd_commit_state(const PowerSgdState& state) {
  std::map<std::string, at::Tensor> committed;
  for (auto& [name, tensor] : state.state_dict()) committed[kPrefix + name] = tensor;
  return committed;
}

std::map<std::string, at::Tensor> powersgd_shared_state(const PowerSgdState& state) {
  std::map<std::string, at::Tensor> shared;
  for (auto& [name, tensor] : state.state_dict()) {
    if (!starts_with(name, "error.")) shared[kPrefix + name] = tensor;
  }
  return shared;
}

void restore_powersgd_from_commit(PowerSgdState& state, const std::map<std::string, at::Tensor>& synced,
                                  const std::map<std::string, at::Tensor>* own) {
  std::map<std::string, at::Tensor> restored;
  for (const auto& [name, tensor] : powersgd_entries(synced)) {
    if (!starts_with(name, "error.")) restored[name] = tensor;
  }
  if (own) {
    for (const auto& [name, tensor] : powersgd_entries(*own)) {
      if (starts_with(name, "error.")) restored[name] = tensor;
    }
  }
  state.load_state_dict(restored);
}

}  // namespace ringtorch
