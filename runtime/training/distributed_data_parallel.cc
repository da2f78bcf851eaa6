#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include <algorithm>
#include <mutex>

#include <ringtorch/distributed_data_parallel.h>
#include <ringtorch/error.h>
#include <ringtorch/timeline.h>

#include "runtime/comm/tensor_checks.h"
#include "runtime/trace/flight_recorder.h"
#include "runtime/training/bucket_assignment.h"

namespace ringtorch {

using Clock = std::chrono::steady_clock;

struct DistributedDataParallel::State : std::enable_shared_from_this<State> {
  struct Bucket {
    at::Tensor flat;               // the gradients of `members`, back to back
    std::vector<size_t> members;   // parameter indices
    std::vector<int64_t> offsets;  // element offset of each member in `flat`
    GradBucket info;               // what the comm hook is given: `flat` and where each member lies
    size_t pending = 0;            // members whose gradient has not arrived this iteration
    bool launched = false;
    PendingReduction reduction;  // from the comm hook, once launched
    Clock::time_point launched_at;
  };

  std::shared_ptr<ProcessGroup> group;
  CommHook hook;
  bool find_unused = false;
  std::vector<std::string> names;
  std::vector<at::Tensor> params;
  std::vector<at::Tensor> grad_views;            // params[i].grad() as a view of its bucket
  std::vector<std::pair<size_t, size_t>> where;  // params[i] -> (bucket, position)
  std::vector<Bucket> buckets;
  std::vector<bool> ready;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;  // autograd holds them weakly

  std::mutex mutex;  // hooks run on autograd's thread; stats are read from others
  bool detached = false;
  bool sync_next_backward = true;  // set at forward time, as PyTorch's require_backward_grad_sync
  bool in_backward = false;
  bool driven_by_data_parallel = false;  // constant after construction
  // Multiplies each bucket before its hook: with uneven_inputs, world size x this rank's share
  // of the step's samples (the hook divides by the world size); else 1.
  double gradient_scale = 1.0;
  std::function<std::chrono::nanoseconds()> stall_clock;  // DdpOptions::stall_clock
  size_t next_to_launch = 0;
  DdpIterationStats current, last;

  void on_gradient(size_t index);
  void launch_ready_buckets();
  void finish_backward();
  void reset_iteration();
  // One span per bucket, launch to completion, each on its own lane (they overlap).
  void record_buckets_in_timeline(const DdpIterationStats& stats) const;
};

namespace {

std::string describe(const std::string& name, const at::Tensor& p) {
  std::string shape;
  for (int64_t d : p.sizes()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  return str_cat(name, " [", shape, "] ", dtype_name(p));
}

// Every rank's parameter list, one line per parameter, through the group (a collective).
std::vector<std::string> gather_descriptions(ProcessGroup& group, const std::string& mine) {
  at::Tensor length = at::full({1}, static_cast<int64_t>(mine.size()), at::kLong);
  at::Tensor lengths = at::empty({group.size()}, at::kLong);
  group.allgather(length, lengths);
  std::vector<int64_t> counts(lengths.data_ptr<int64_t>(), lengths.data_ptr<int64_t>() + group.size());
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  at::Tensor bytes = at::empty({total}, at::kByte);
  at::Tensor my_bytes = at::empty({static_cast<int64_t>(mine.size())}, at::kByte);
  std::copy(mine.begin(), mine.end(), my_bytes.data_ptr<uint8_t>());
  group.allgatherv(my_bytes, bytes, counts);
  std::vector<std::string> all;
  const char* at = reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>());
  for (int64_t c : counts) {
    all.emplace_back(at, static_cast<size_t>(c));
    at += c;
  }
  return all;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(text.substr(start, end - start));
  }
  return lines;
}

void check_same_parameters(ProcessGroup& group, const std::vector<std::string>& names,
                           const std::vector<at::Tensor>& params) {
  std::string mine;
  for (size_t i = 0; i < params.size(); ++i) mine += describe(names[i], params[i]) + "\n";
  const auto all = gather_descriptions(group, mine);
  const auto reference = lines_of(all[0]);
  for (int r = 1; r < group.size(); ++r) {
    if (all[r] == all[0]) continue;
    const auto theirs = lines_of(all[r]);
    size_t i = 0;
    while (i < reference.size() && i < theirs.size() && reference[i] == theirs[i]) ++i;
    const std::string left = i < reference.size() ? "'" + reference[i] + "'" : "nothing (it has fewer parameters)";
    const std::string right = i < theirs.size() ? "'" + theirs[i] + "'" : "nothing (it has fewer parameters)";
    throw MismatchError(str_cat("[rank ", group.rank(), "/", group.size(),
                                "] DistributedDataParallel: the model differs across ranks at parameter ", i,
                                ": rank 0 has ", left, ", rank ", r, " has ", right,
                                "; every rank must build the same model (same layers, shapes and dtypes)"));
  }
}

}  // namespace

double DdpIterationStats::hidden_fraction() const {
  double total = 0, hidden = 0;
  for (const auto& b : buckets) {
    const double span = std::chrono::duration<double>(b.completed - b.started).count();
    total += span;
    if (b.started < last_gradient) {
      hidden += std::chrono::duration<double>(std::min(b.completed, last_gradient) - b.started).count();
    }
  }
  return total > 0 ? hidden / total : 0.0;
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<torch::nn::Module> module,
                                                 torch::nn::AnyModule forward, std::shared_ptr<ProcessGroup> group,
                                                 DdpOptions options, DataParallel* data_parallel)
    : data_parallel_(data_parallel),
      module_(std::move(module)),
      module_forward_(std::move(forward)),
      group_(std::move(group)),
      options_(std::move(options)),
      state_(std::make_shared<State>()) {
  if (!group_) throw InvalidArgumentError("DistributedDataParallel: no process group");
  State& s = *state_;
  s.group = group_;
  s.hook = options_.comm_hook ? options_.comm_hook : allreduce_hook();
  s.find_unused = options_.find_unused_parameters;
  s.driven_by_data_parallel = data_parallel_ != nullptr;
  s.stall_clock = options_.stall_clock;
  for (const auto& item : module_->named_parameters()) {
    if (!item.value().requires_grad()) continue;
    s.names.push_back(item.key());
    s.params.push_back(item.value());
  }
  check_same_parameters(*group_, s.names, s.params);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : s.params) group_->broadcast(p, 0);
    for (auto& b : module_->buffers()) group_->broadcast(b, 0);
  }
  // Buckets, then every .grad as a view of its bucket (so reduction needs no copies).
  std::vector<BucketCandidate> candidates;
  for (auto& p : s.params) {
    candidates.push_back({static_cast<size_t>(p.nbytes()), str_cat(dtype_name(p), " on ", p.device().str())});
  }
  const auto mib = [](double v) { return static_cast<size_t>(v * 1024 * 1024); };
  s.where.resize(s.params.size());
  s.grad_views.resize(s.params.size());
  for (auto& members : assign_buckets(candidates, mib(options_.first_bucket_mb), mib(options_.bucket_cap_mb))) {
    State::Bucket bucket;
    int64_t total = 0;
    for (size_t i : members) {
      bucket.offsets.push_back(total);
      total += s.params[i].numel();
    }
    const at::Tensor& first = s.params[members.front()];
    bucket.flat = at::zeros({total}, first.options().requires_grad(false));
    for (size_t k = 0; k < members.size(); ++k) {
      const size_t i = members[k];
      at::Tensor& p = s.params[i];
      // from_blob, not narrow().view(): optimizers' zero_grad() detaches .grad in place, which
      // autograd refuses for views; this shares the memory without being an autograd view.
      at::Tensor flat = bucket.flat;
      at::Tensor view = at::from_blob(
          static_cast<char*>(flat.data_ptr()) + bucket.offsets[k] * flat.element_size(), p.sizes(), [flat](void*) {},
          flat.options());
      if (p.grad().defined()) view.copy_(p.grad());
      s.grad_views[i] = view;
      p.mutable_grad() = view;
      s.where[i] = {s.buckets.size(), k};
    }
    bucket.info.index = s.buckets.size();
    bucket.info.buffer = bucket.flat;
    for (size_t k = 0; k < members.size(); ++k) {
      const at::Tensor& p = s.params[members[k]];
      bucket.info.members.push_back({s.names[members[k]], p.sizes().vec(), bucket.offsets[k], p.numel()});
    }
    bucket.members = std::move(members);
    s.buckets.push_back(std::move(bucket));
  }
  for (auto& b : s.buckets) b.info.count = s.buckets.size();
  s.ready.assign(s.params.size(), false);
  s.reset_iteration();
  if (!data_parallel_) register_gradient_hooks();
}

void DistributedDataParallel::register_gradient_hooks() {
  State& s = *state_;
  // Gradient-ready hooks on each parameter's AccumulateGrad node: they fire after .grad is written.
  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < s.params.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(s.params[i]);
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [weak, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          if (auto state = weak.lock()) state->on_gradient(i);
          return outputs;
        }));
    s.accumulators.push_back(std::move(accumulator));
  }
}

DistributedDataParallel::DistributedDataParallel(DataParallel& data_parallel, std::shared_ptr<ProcessGroup> group,
                                                 DdpOptions options)
    : DistributedDataParallel(std::shared_ptr<torch::nn::Module>(&data_parallel.module(), [](torch::nn::Module*) {}),
                              torch::nn::AnyModule(), std::move(group), std::move(options), &data_parallel) {
  data_parallel.sync_replicas();  // rank 0's weights, just broadcast to the primary, everywhere
  // DataParallel calls back once the replicas' gradients are summed into the primary's: then
  // every parameter is ready at once, and the buckets go out in order.
  std::weak_ptr<State> weak = state_;
  data_parallel.add_backward_listener([weak] {
    auto state = weak.lock();
    if (!state) return;
    for (size_t i = 0; i < state->params.size(); ++i) state->on_gradient(i);
    state->finish_backward();
  });
}

DistributedDataParallel::~DistributedDataParallel() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->detached = true;
}

void DistributedDataParallel::before_forward(int64_t inferred_samples) {
  // A forward without autograd (evaluation through the wrapper) is followed by no backward: it
  // must not tell joined ranks to expect bucket reductions.
  const bool synchronising = no_sync_depth_ == 0 && torch::GradMode::is_enabled();
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->sync_next_backward = synchronising;
  }
  int buffer_source = 0;
  if (options_.uneven_inputs) {
    const int64_t samples = next_batch_samples_.value_or(inferred_samples);
    next_batch_samples_.reset();
    if (samples < 0) {
      throw InvalidArgumentError(
          str_cat("[rank ", group_->rank(), "/", group_->size(),
                  "] DistributedDataParallel: uneven_inputs needs the batch's number of samples: "
                  "the first forward argument is not a tensor; call set_next_batch_samples()"));
    }
    buffer_source = agree_on_step(samples, synchronising);
  }
  if (options_.broadcast_buffers && group_->size() > 1) {
    torch::NoGradGuard no_grad;
    for (auto& b : module_->buffers()) group_->broadcast(b, buffer_source);
  }
}

void DistributedDataParallel::set_next_batch_samples(int64_t samples) {
  if (!options_.uneven_inputs) {
    throw InvalidArgumentError("DistributedDataParallel::set_next_batch_samples needs DdpOptions::uneven_inputs");
  }
  if (samples < 0) throw InvalidArgumentError(str_cat("set_next_batch_samples: ", samples, " samples"));
  next_batch_samples_ = samples;
}

// Note [Uneven inputs]: every step starts with an all-reduce (sum) of (1, samples,
// synchronising, then one flag per rank, this rank's set) from each active rank and zeros from
// each joined one. Its result gives the step's total samples, hence this rank's gradient
// scale; tells a joined rank whether the others are still stepping and whether their backward
// will reduce gradients (not under no_sync, not without autograd); and names the lowest active
// rank, whose buffers are broadcast (rank 0's may be stale once it has joined). A joined rank
// then issues what an active rank's step issues, in the same order: the buffer broadcast (when
// enabled), then one hook call per bucket, on zeros. Under no_sync, samples and totals add up
// until the synchronising step, whose scale covers them all (exact when each rank's micro
// batches have the same size, the usual gradient accumulation).
namespace {

at::Tensor step_agreement(int world, int rank, int64_t samples, bool synchronising) {
  at::Tensor step = at::zeros({3 + world}, at::kLong);
  if (rank >= 0) {
    int64_t* v = step.data_ptr<int64_t>();
    v[0] = 1;
    v[1] = samples;
    v[2] = synchronising ? 1 : 0;
    v[3 + rank] = 1;
  }
  return step;
}

int lowest_active(const at::Tensor& step, int world) {
  const int64_t* v = step.data_ptr<int64_t>();
  for (int r = 0; r < world; ++r) {
    if (v[3 + r]) return r;
  }
  return 0;
}

}  // namespace

int DistributedDataParallel::agree_on_step(int64_t samples, bool synchronising) {
  const int world = group_->size();
  at::Tensor step = step_agreement(world, group_->rank(), samples, synchronising);
  const auto& stall_clock = options_.stall_clock;
  const auto start = Clock::now();
  const auto stalled_before = stall_clock ? stall_clock() : std::chrono::nanoseconds(0);
  group_->allreduce(step, ReduceOp::kSum);
  if (stall_clock)
    last_agreement_stalled_ = std::chrono::duration_cast<Clock::duration>(stall_clock() - stalled_before);
  last_agreement_wait_ = Clock::now() - start;
  ++steps_run_;
  accumulated_samples_ += samples;
  accumulated_total_ += step[1].item<int64_t>();
  if (synchronising) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->gradient_scale =
        accumulated_total_ > 0 ? static_cast<double>(world) * accumulated_samples_ / accumulated_total_ : 0.0;
    accumulated_samples_ = accumulated_total_ = 0;
  }
  return lowest_active(step, world);
}

int64_t DistributedDataParallel::join() {
  if (!options_.uneven_inputs)
    throw InvalidArgumentError("DistributedDataParallel::join needs DdpOptions::uneven_inputs");
  State& s = *state_;
  const int world = group_->size();
  int64_t answered = 0;
  for (;;) {
    at::Tensor step = step_agreement(world, /*rank=*/-1, 0, false);
    group_->allreduce(step, ReduceOp::kSum);
    if (step[0].item<int64_t>() == 0) break;  // every rank has joined
    ++answered;
    torch::NoGradGuard no_grad;
    if (options_.broadcast_buffers && world > 1) {
      const int source = lowest_active(step, world);
      for (auto& b : module_->buffers()) group_->broadcast(b, source);
    }
    if (step[2].item<int64_t>() == 0 || world == 1) continue;  // no backward reduces this step
    std::vector<PendingReduction> reductions;
    for (auto& bucket : s.buckets) {
      bucket.flat.zero_();  // this rank's own gradients: it does not step any more
      reductions.push_back(s.hook(*group_, bucket.info));
    }
    complete_reductions(reductions);
  }
  // The replicas drifted apart while some ranks had joined: take the one that ran longest.
  at::Tensor mine = at::full({1}, steps_run_, at::kLong);
  at::Tensor all = at::empty({world}, at::kLong);
  group_->allgather(mine, all);
  const int64_t* steps = all.data_ptr<int64_t>();
  const int source = static_cast<int>(std::max_element(steps, steps + world) - steps);
  torch::NoGradGuard no_grad;
  for (auto& p : s.params) group_->broadcast(p, source);
  for (auto& b : module_->buffers()) group_->broadcast(b, source);
  steps_run_ = 0;
  accumulated_samples_ = accumulated_total_ = 0;
  return answered;
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp) : ddp_(ddp) { ++ddp_.no_sync_depth_; }
DistributedDataParallel::NoSync::~NoSync() { --ddp_.no_sync_depth_; }

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_parameter_names() const {
  std::vector<std::vector<std::string>> names;
  for (const auto& b : state_->buckets) {
    names.emplace_back();
    for (size_t i : b.members) names.back().push_back(state_->names[i]);
  }
  return names;
}

DdpIterationStats DistributedDataParallel::last_iteration_stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->last;
}

void DistributedDataParallel::State::reset_iteration() {
  std::fill(ready.begin(), ready.end(), false);
  for (auto& b : buckets) {
    b.pending = b.members.size();
    b.launched = false;
    b.reduction = PendingReduction();
  }
  next_to_launch = 0;
  in_backward = false;
  current = DdpIterationStats();
}

void DistributedDataParallel::State::on_gradient(size_t index) {
  std::lock_guard<std::mutex> lock(mutex);
  if (detached || !sync_next_backward || group->size() == 1) return;
  if (!in_backward) {
    in_backward = true;
    current.first_gradient = Clock::now();
    // Runs once autograd has finished this backward pass, on its thread. (Over a DataParallel,
    // its end-of-backward listener calls finish_backward() itself.)
    if (!driven_by_data_parallel) {
      std::weak_ptr<State> weak = weak_from_this();
      torch::autograd::Engine::get_default_engine().queue_callback([weak] {
        if (auto state = weak.lock()) state->finish_backward();
      });
    }
  }
  current.last_gradient = Clock::now();
  // A gradient that is no longer the bucket's view (set to None and recreated): copy it in and
  // point .grad at the view again.
  at::Tensor& param = params[index];
  if (!param.grad().defined() || param.grad().data_ptr() != grad_views[index].data_ptr()) {
    if (param.grad().defined()) grad_views[index].copy_(param.grad());
    param.mutable_grad() = grad_views[index];
  }
  if (ready[index]) return;
  ready[index] = true;
  --buckets[where[index].first].pending;
  launch_ready_buckets();
}

void DistributedDataParallel::State::launch_ready_buckets() {
  while (next_to_launch < buckets.size() && buckets[next_to_launch].pending == 0) {
    Bucket& bucket = buckets[next_to_launch++];
    bucket.launched_at = Clock::now();
    if (gradient_scale == 0.0) {
      bucket.flat.zero_();  // no samples here: nothing, not NaN * 0, from an empty batch's loss
    } else if (gradient_scale != 1.0) {
      bucket.flat.mul_(gradient_scale);
    }
    // The flight recorder and the timeline name the bucket's collective(s).
    const ScopedOperationLabel label(str_cat("ddp bucket ", next_to_launch - 1));
    bucket.reduction = hook(*group, bucket.info);
    bucket.launched = true;
  }
}

void DistributedDataParallel::State::record_buckets_in_timeline(const DdpIterationStats& stats) const {
  for (size_t k = 0; k < stats.buckets.size() && k < buckets.size(); ++k) {
    const auto& b = stats.buckets[k];
    const int lane = Timeline::kFirstLane + static_cast<int>(k);
    Timeline::name_lane(lane, str_cat("ddp bucket ", k));
    const auto queued_us = std::chrono::duration_cast<std::chrono::microseconds>(b.started - b.launched).count();
    Timeline::record_on_lane(lane, str_cat("bucket ", k), "ddp", b.launched, b.completed,
                             str_cat("{\"bytes\":", buckets[k].flat.nbytes(),
                                     ",\"parameters\":", buckets[k].members.size(), ",\"queued_us\":", queued_us, "}"));
  }
}

void DistributedDataParallel::State::finish_backward() {
  std::unique_lock<std::mutex> lock(mutex);
  if (!in_backward || detached) return;
  std::vector<size_t> unused;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!ready[i]) unused.push_back(i);
  }
  if (!unused.empty() && !find_unused) {
    std::string list;
    for (size_t k = 0; k < unused.size() && k < 5; ++k) list += (k ? ", " : "") + names[unused[k]];
    if (unused.size() > 5) list += str_cat(" and ", unused.size() - 5, " more");
    // What was launched still completes on the peers; wait for it so nothing is left in flight.
    std::vector<PendingReduction> launched;
    for (auto& b : buckets) {
      if (b.launched) launched.push_back(b.reduction);
    }
    reset_iteration();
    lock.unlock();
    for (auto& r : launched) {
      try {
        r.work->wait();
      } catch (...) {
      }
    }
    throw InvalidArgumentError(str_cat(
        "[rank ", group->rank(), "/", group->size(), "] DistributedDataParallel: ", unused.size(),
        " parameter(s) got no gradient in this backward: ", list,
        "; their buckets were not reduced (the other ranks wait for them). If the model does not use every parameter "
        "in every iteration, set DdpOptions::find_unused_parameters = true"));
  }
  // With find_unused_parameters: an unused parameter contributes its current .grad (the view).
  for (size_t i : unused) {
    ready[i] = true;
    --buckets[where[i].first].pending;
  }
  launch_ready_buckets();
  std::vector<PendingReduction> reductions;
  std::vector<Clock::time_point> launched_at;
  for (auto& b : buckets) {
    reductions.push_back(b.reduction);
    launched_at.push_back(b.launched_at);
  }
  DdpIterationStats stats = current;
  reset_iteration();
  lock.unlock();
  const auto stalled_before = stall_clock ? stall_clock() : std::chrono::nanoseconds(0);
  std::exception_ptr failure;
  try {
    complete_reductions(reductions);
  } catch (...) {
    failure = std::current_exception();
  }
  for (size_t k = 0; k < reductions.size(); ++k) {
    stats.buckets.push_back({launched_at[k], reductions[k].work->started_at(), reductions[k].work->completed_at()});
  }
  stats.finished = Clock::now();
  if (stall_clock) {
    stats.stalled_while_waiting = std::chrono::duration_cast<Clock::duration>(stall_clock() - stalled_before);
  }
  if (Timeline::enabled()) record_buckets_in_timeline(stats);
  lock.lock();
  last = stats;
  lock.unlock();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace ringtorch
