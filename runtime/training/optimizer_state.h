// An optimizer's per-parameter state (SGD's momentum, Adam's moments and step, ...) as plain
// values, for checkpoints: a dict that any pickle reader (Python's torch.load too) reads without
// running TorchScript. LibTorch's own optimizer archive is a TorchScript module whose loading
// compiles the code stored in it, and damaged code crashed that compiler (tests/fuzz).
//
//   {"kind": "sgd" | "adam" | "adamw" | "adagrad" | "rmsprop",
//    "parameters": {"<index>": {"<field>": tensor or int, ...}, ...}}
//
// <index> counts the parameters over the param groups in order; a parameter without state yet
// has no entry. The fields are the LibTorch param state's (momentum_buffer; step, exp_avg,
// exp_avg_sq, max_exp_avg_sq; sum; square_avg, grad_avg). Hyperparameters (lr, momentum, ...) are
// not saved: they come from the program that resumes.
//
// Thread-safety: none; the optimizer's own (one training thread).
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/optim/optimizer.h>

#include <string>
#include <type_traits>
#include <utility>

namespace ringtorch {

using OptimizerStateMap = std::remove_reference_t<decltype(std::declval<torch::optim::Optimizer&>().state())>;

// Throws InvalidArgumentError for an optimizer other than SGD, Adam, AdamW, Adagrad, RMSprop
// (save without an optimizer to keep the weights only).
c10::IValue optimizer_state_dict(const torch::optim::Optimizer& optimizer);

// The state map `state` describes for `optimizer`, checked (kind, parameter count, shapes,
// fields) but not installed: `optimizer.state() = std::move(map)` installs it. Throws, naming
// `path`, InvalidArgumentError for the state of another optimizer (another kind, more
// parameters) and IoError for a damaged one (not a dict, a field missing or of another shape).
OptimizerStateMap parse_optimizer_state(const torch::optim::Optimizer& optimizer, const c10::IValue& state,
                                        const std::string& path);

}  // namespace ringtorch
