// DistributedDataParallel: torch.nn.parallel.DistributedDataParallel for LibTorch modules.
//
// Example (given: torch::Tensor x, torch::Tensor y):
//   auto group = ringtorch::ProcessGroup::create(ringtorch::rendezvous());
//   auto model = std::make_shared<torch::nn::LinearImpl>(784, 10);  // already on its device
//   ringtorch::DistributedDataParallel ddp(model, group);  // checks and broadcasts rank 0's weights
//   torch::optim::SGD sgd(model->parameters(), 0.1);
//   auto loss = torch::cross_entropy_loss(ddp.forward(x), y);
//   loss.backward();  // gradients arrive averaged over ranks
//   sgd.step();
//
// Construction (a collective: every rank constructs it, in the same order as its other
// collectives) checks that every rank has the same trainable parameters (names, shapes, dtypes)
// and throws MismatchError naming the first difference and the ranks on each side; then rank
// 0's trainable parameters and all buffers are broadcast (frozen parameters, requires_grad
// false, are neither checked nor broadcast).
//
// Gradients travel in buckets (bucket_assignment.h): each parameter's .grad is a view into its
// bucket, and a bucket is all-reduced asynchronously as soon as backward has produced all its
// gradients, in bucket order on every rank, so communication overlaps the rest of backward. The
// end of backward waits for every bucket. A parameter that got no gradient makes backward throw
// naming it (PyTorch hangs or errors later); with find_unused_parameters its current .grad
// (zeros after zero_grad) is used instead.
//
// Thread-safety: one training thread (the one running forward and backward). The module must
// outlive the wrapper; a destroyed wrapper leaves its hooks registered but inert (they hold
// only a weak_ptr to its state).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/pimpl.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <ringtorch/comm_hooks.h>
#include <ringtorch/data_parallel.h>
#include <ringtorch/process_group.h>

namespace ringtorch {

struct DdpOptions {
  double bucket_cap_mb = 25;      // later buckets close at this size (MiB)
  double first_bucket_mb = 1;     // the first bucket of each dtype/device, small to start early
  bool broadcast_buffers = true;  // rank 0's buffers (BatchNorm statistics) before every forward
  bool find_unused_parameters = false;
  CommHook comm_hook;  // empty: allreduce_hook(); see comm_hooks.h for fp16/bf16 compression
  // Ranks whose batches differ in size or in number (docs/training.md, "Ranks of unequal
  // speed"). Before each forward the ranks agree, in one small all-reduce, on how many samples
  // each contributes; the reduced gradient is then the mean over all ranks' samples, the sum of
  // b_r * g_r over the sum of b_r (not the mean of per-rank means), on every hook; and a rank
  // that has run out of batches calls join(). The loss must be the mean over the rank's own
  // samples (PyTorch's default reduction). Every forward with autograd on and outside no_sync
  // must be followed by exactly one backward (as in PyTorch); buffers come from the lowest rank
  // still training. Costs that all-reduce per step.
  bool uneven_inputs = false;
  // A clock of the time this process stood still for reasons of its own (for example its CPU
  // quota: a rank held to a fraction of a core stops wherever its quota runs out, inside a wait
  // for the others too). Read at the start and end of each wait for the other ranks, so that a
  // caller measuring compute time can count that part of a wait as its own slowness
  // (DdpIterationStats::stalled_while_waiting, last_step_agreement_stalled()). Empty: not read.
  std::function<std::chrono::nanoseconds()> stall_clock;
};

// Timing of the last synchronised backward, for overlap measurements (steady clock).
struct DdpIterationStats {
  std::chrono::steady_clock::time_point first_gradient;  // the first hook fired
  std::chrono::steady_clock::time_point last_gradient;   // the last hook fired: backward's compute done
  std::chrono::steady_clock::time_point finished;        // every bucket reduced
  struct Bucket {
    std::chrono::steady_clock::time_point launched, started, completed;
  };
  std::vector<Bucket> buckets;  // in launch order
  // With a DdpOptions::stall_clock: how far it moved between last_gradient and finished.
  std::chrono::steady_clock::duration stalled_while_waiting{};
  // Share of the buckets' communication time (started..completed) before last_gradient.
  double hidden_fraction() const;
};

class DistributedDataParallel {
 public:
  template <typename ModuleType>
  DistributedDataParallel(std::shared_ptr<ModuleType> module, std::shared_ptr<ProcessGroup> group,
                          DdpOptions options = {})
      : DistributedDataParallel(std::static_pointer_cast<torch::nn::Module>(module), torch::nn::AnyModule(module),
                                std::move(group), std::move(options)) {}
  // A type-erased module, as the model registry returns (models/registry.h).
  DistributedDataParallel(const torch::nn::AnyModule& module, std::shared_ptr<ProcessGroup> group,
                          DdpOptions options = {})
      : DistributedDataParallel(module.ptr(), module, std::move(group), std::move(options)) {}
  // Over a DataParallel (several devices in this process): the primary replica's gradients,
  // once DataParallel has summed the replicas into them, are reduced across processes at the
  // end of backward. `data_parallel` must outlive the wrapper.
  DistributedDataParallel(DataParallel& data_parallel, std::shared_ptr<ProcessGroup> group, DdpOptions options = {});
  template <typename Impl>
  DistributedDataParallel(torch::nn::ModuleHolder<Impl> module, std::shared_ptr<ProcessGroup> group,
                          DdpOptions options = {})
      : DistributedDataParallel(module.ptr(), std::move(group), std::move(options)) {}
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Runs the module's forward (buffers broadcast first, when enabled).
  template <typename... Args>
  torch::Tensor forward(Args&&... args) {
    before_forward(options_.uneven_inputs ? leading_size(args...) : -1);
    if constexpr (sizeof...(Args) == 1) {
      if (data_parallel_) return data_parallel_->forward(std::forward<Args>(args)...);
    }
    return module_forward_.forward(std::forward<Args>(args)...);
  }

  // With uneven_inputs: how many samples the next forward's batch holds (default: the first
  // argument's size(0)). A rank may give 0: it still runs forward and backward, and its
  // gradient (whatever it is, NaN from an empty mean included) counts for nothing.
  void set_next_batch_samples(int64_t samples);

  // With uneven_inputs: how long the last forward waited in the step's agreement (mostly for
  // slower ranks to arrive): communication wait, for measurements of compute time.
  std::chrono::steady_clock::duration last_step_agreement_wait() const { return last_agreement_wait_; }
  // How far DdpOptions::stall_clock moved during that wait (zero without one).
  std::chrono::steady_clock::duration last_step_agreement_stalled() const { return last_agreement_stalled_; }

  // With uneven_inputs, once this rank has no more batches (every rank calls it after its
  // loop, as PyTorch's `with Join([ddp]):` does when it ends): answers the other ranks' steps
  // with zero gradients and no samples until every rank has joined; then every rank takes the
  // parameters and buffers of the rank that ran the most steps (the lowest such rank), so the
  // replicas are identical again. Optimizer state is not synchronised. Returns the number of
  // steps this rank answered without data.
  int64_t join();

  torch::nn::Module& module() { return *module_; }
  ProcessGroup& group() { return *group_; }

  // While a NoSync lives, backward accumulates gradients locally (no communication); the
  // first backward after it reduces the accumulated sum, as torch's `with ddp.no_sync():`.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
  };
  NoSync no_sync() { return NoSync(*this); }

  // Parameter names per bucket, in launch order.
  std::vector<std::vector<std::string>> bucket_parameter_names() const;
  DdpIterationStats last_iteration_stats() const;

  struct State;  // shared with the autograd hooks (distributed_data_parallel.cc)

 private:
  DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, torch::nn::AnyModule forward,
                          std::shared_ptr<ProcessGroup> group, DdpOptions options,
                          DataParallel* data_parallel = nullptr);
  void before_forward(int64_t inferred_samples);
  void register_gradient_hooks();
  // With uneven_inputs: the step's all-reduce (Note [Uneven inputs]); returns the lowest
  // active rank, the source of the buffers.
  int agree_on_step(int64_t samples, bool synchronising);

  static int64_t leading_size() { return -1; }
  template <typename First, typename... Rest>
  static int64_t leading_size(const First& first, const Rest&...) {
    if constexpr (std::is_convertible_v<const First&, const at::Tensor&>) {
      const at::Tensor& t = first;
      return !t.defined() ? -1 : t.dim() > 0 ? t.size(0) : 1;
    } else {
      return -1;
    }
  }

  DataParallel* data_parallel_ = nullptr;  // set when wrapping a DataParallel
  std::shared_ptr<torch::nn::Module> module_;
  torch::nn::AnyModule module_forward_;
  std::shared_ptr<ProcessGroup> group_;
  DdpOptions options_;
  std::shared_ptr<State> state_;
  int no_sync_depth_ = 0;
  std::optional<int64_t> next_batch_samples_;  // set_next_batch_samples(), for one forward
  int64_t steps_run_ = 0;                      // forwards with uneven_inputs, for join()
  int64_t accumulated_samples_ = 0;            // this rank's, since the last synchronising forward
  int64_t accumulated_total_ = 0;              // all ranks', likewise
  std::chrono::steady_clock::duration last_agreement_wait_{};
  std::chrono::steady_clock::duration last_agreement_stalled_{};
};

}  // namespace ringtorch
