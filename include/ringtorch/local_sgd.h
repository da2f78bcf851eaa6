// Local SGD with an outer optimizer: DiLoCo's inner and outer steps (Douillard et al., 2023).
// Each rank trains its own replica with its own (inner) optimizer for several steps, with no
// gradient all-reduce; then outer_step() all-reduces the change of every rank's parameters since
// the previous outer step (the "outer gradient": anchor - parameters), averaged with the weights
// the ranks give (the samples each trained on), applies it to the anchor with SGD with Nesterov
// momentum (torch.optim.SGD's update), and every replica starts the next period from the result.
//
// Example (given: torch::nn::Module& model, std::shared_ptr<ringtorch::ProcessGroup> group):
//   ringtorch::LocalSgd local(model, group, ringtorch::LocalSgdOptions{});
//   torch::optim::SGD inner(model.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
//   for (int step = 1; step <= 64; ++step) {
//     inner.zero_grad();
//     at::Tensor x = torch::randn({16, 4});
//     // ... compute this rank's loss on its own batch, loss.backward(), inner.step() ...
//     local.record_inner_step(x.size(0));
//     if (step % 16 == 0) local.outer_step();  // a collective: every rank of the group calls it
//   }
//
// What outer_step() does, with w_r the samples rank r recorded since the previous outer step and
// Δ_r = anchor - rank r's parameters: Δ = Σ w_r Δ_r / Σ w_r; with momentum m > 0, b = Δ at the
// first outer step and m b + Δ later; the step is Δ + m b (Nesterov) or b; the new parameters
// are anchor - outer_lr x step. With outer_lr 1, momentum 0 and one inner step per period this
// is synchronous data parallelism (every rank's update averaged). Floating-point buffers
// (BatchNorm's running statistics) become the same weighted average; integer buffers (its
// batch counter) the largest. The result is computed from values every rank holds alike, so the
// replicas are bitwise equal after every outer step. A rank that recorded no samples contributes
// nothing; when no rank did, the step changes nothing.
//
// With `overlap_steps` N, outer_step() starts the all-reduce and returns: the next period's
// inner steps run while it travels, and the N-th record_inner_step() after it (or the next
// outer_step() or synchronize(), whichever comes first) waits for it and applies it, keeping what
// this rank trained meanwhile: its parameters become the new anchor plus its own change since the
// step started, which counts in the next outer gradient (Streaming DiLoCo's overlap with delay
// N, without its mixing). The others' changes thus reach a rank N inner steps late, which costs
// accuracy as N grows (docs/training.md, "Local SGD").
// Buffers are not kept that way: they take the average when the step is applied, so BatchNorm's
// statistics of those N steps are replaced, not added to.
// The replicas are equal only after synchronize(), which finishes the step in flight and runs
// one more outer step synchronously.
//
// On the wire per outer step: one all-reduce of the parameters' size (in bf16 with
// `bf16_outer_gradient`: half the bytes) plus the floating buffers and one weight, in the
// parameters' dtype; integer buffers add one more.
//
// Inner optimizers are the caller's and stay each rank's own (DiLoCo keeps them local). The
// anchor and the momentum are kept beside the model, on its device (twice the parameters).
//
// Thread-safety: one thread (the training loop) calls everything; the model must not be trained
// during outer_step().
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ringtorch/process_group.h>
#include <ringtorch/work.h>

namespace ringtorch {

struct LocalSgdOptions {
  double outer_lr = 0.7;             // DiLoCo's
  double outer_momentum = 0.9;       // DiLoCo's; 0: no momentum
  bool nesterov = true;              // DiLoCo's outer optimizer is SGD with Nesterov momentum
  bool bf16_outer_gradient = false;  // all-reduce the outer gradient in bfloat16
  // 0: outer_step() finishes the outer step before it returns. N > 0: its all-reduce travels
  // during the next period's first N inner steps, and then it is applied (see below).
  int overlap_steps = 0;
};

// The counts of the periods so far.
struct LocalSgdStats {
  int64_t outer_steps = 0;
  int64_t inner_steps = 0;            // this rank's, since the start
  int64_t inner_steps_in_period = 0;  // this rank's, since the last outer step
  int64_t samples_in_period = 0;      // this rank's weight at the next outer step
  double wait_seconds = 0;            // waiting for outer steps' all-reduces, since the start
};

class LocalSgd {
 public:
  // The anchor is the module's parameters now: they must be the same on every rank (a seeded
  // model, or broadcast_training_state first). Throws InvalidArgumentError for an option out of
  // range (outer_lr <= 0 or not finite, momentum outside [0, 1), overlap_steps < 0).
  // It keeps the module's parameter and buffer tensors (sharing their storage), not the module:
  // load new values into them in place (as load_state_dict does), never replace them.
  LocalSgd(torch::nn::Module& module, std::shared_ptr<ProcessGroup> group, LocalSgdOptions options);

  // Counts one inner step of this rank on `samples` samples (its weight in the next average).
  // With overlap_steps, the N-th after an outer step waits for it and applies it (its errors are
  // the group's).
  void record_inner_step(int64_t samples);
  // The period's end: a collective of the group (see above). Throws the group's errors (with
  // overlap: those of the step it waits for).
  void outer_step();
  // The period's end, finished before it returns, so that the replicas are bitwise equal (for an
  // evaluation, a checkpoint, the end): with overlap, waits for the outer step in flight, then
  // runs one synchronously; without, the same as outer_step(). A collective.
  void synchronize();

  // From now on outer steps run in `group` (the ranks that still train); the anchor stays.
  void set_group(std::shared_ptr<ProcessGroup> group);
  // Makes the module's parameters now the anchor (after they were loaded or handed over from
  // another rank); the period's counts restart, and an outer step in flight is dropped.
  void reset_anchor();

  const LocalSgdOptions& options() const { return options_; }
  LocalSgdStats stats() const { return stats_; }
  // Elements all-reduced at the last outer step (0 before the first).
  int64_t elements_per_outer_step() const { return elements_per_outer_step_; }

  // The outer state as named tensors (copies): "outer_steps", "momentum.<i>" (the outer momentum
  // of the i-th parameter, once there is one). The same on every rank after an outer step
  // (with overlap: after synchronize()). The anchor is not in it: it is then the parameters.
  std::map<std::string, at::Tensor> state_dict() const;
  // Restores state_dict()'s names; call right after the parameters of the same outer step were
  // loaded (the anchor becomes them). Throws InvalidArgumentError, naming the entry, for a
  // momentum that does not fit its parameter.
  void load_state_dict(const std::map<std::string, at::Tensor>& state);

 private:
  // An outer step's all-reduces in flight.
  struct Pending {
    std::vector<std::shared_ptr<Work>> works;
    at::Tensor change;  // with bf16: the outer gradient; else undefined (it is in `rest`)
    at::Tensor rest;    // [w Δ (unless bf16)..., w buffers..., w]
    at::Tensor counts;  // the integer buffers (max), when there are any
  };
  void start_outer_step();
  void finish_outer_step();

  // Constant after construction.
  const LocalSgdOptions options_;
  std::vector<at::Tensor> parameters_;  // the module's, in order
  std::vector<at::Tensor> buffers_;     // the module's floating-point buffers
  std::vector<at::Tensor> counters_;    // the module's integer buffers

  std::shared_ptr<ProcessGroup> group_;
  std::vector<at::Tensor> anchor_;    // the parameters of the last outer step applied (the same on every rank)
  std::vector<at::Tensor> base_;      // what the next outer gradient is measured from: the anchor, or with
                                      // overlap the parameters when the step in flight started
  std::unique_ptr<Pending> pending_;  // with overlap, between outer steps
  int64_t steps_since_start_ = 0;     // inner steps since the outer step in flight started
  std::vector<at::Tensor> momentum_;  // empty until the first outer step with momentum
  LocalSgdStats stats_;
  int64_t elements_per_outer_step_ = 0;
};

// An optimizer's per-parameter state (SGD's momentum, Adam's moments and step counts) as one 1-D
// float64 tensor (exact for float32 and float64 state and for step counts), and back: the inner optimizers differ
// from rank to rank, and ringtrain keeps every rank's in its checkpoints as one row each. The
// order is fixed by the parameters' and the fields' order, so a vector loads into an optimizer of
// the same kind over the same model that holds state for the same parameters (one that has
// stepped, or loaded a checkpoint's state); else load_optimizer_state_vector throws
// InvalidArgumentError saying the sizes. Throws InvalidArgumentError for optimizers other than
// SGD, Adam, AdamW, Adagrad and RMSprop.
at::Tensor optimizer_state_vector(const torch::optim::Optimizer& optimizer);
void load_optimizer_state_vector(torch::optim::Optimizer& optimizer, const at::Tensor& vector);

}  // namespace ringtorch
