#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include <ringtorch/data_parallel.h>
#include <ringtorch/error.h>
#ifdef RINGTORCH_WITH_CUDA
#include "runtime/comm/cuda_tensor_staging.h"
#include "runtime/cuda/blas.h"
#endif

namespace ringtorch {
namespace {

// A persistent thread that runs one job at a time for its replica.
class ReplicaWorker {
 public:
  ReplicaWorker() : thread_([this] { loop(); }) {}
  ~ReplicaWorker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void start(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = std::move(job);
      done_ = false;
      error_ = nullptr;
    }
    cv_.notify_all();
  }
  // Waits for the job; rethrows what it threw.
  void finish() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return done_; });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      cv_.wait(lock, [&] { return stopping_ || job_; });
      if (stopping_) return;
      auto job = std::move(job_);
      job_ = nullptr;
      lock.unlock();
      std::exception_ptr error;
      try {
        job();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      error_ = error;
      done_ = true;
      cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<void()> job_;  // guarded by mutex_
  bool done_ = true;           // guarded by mutex_
  bool stopping_ = false;      // guarded by mutex_
  std::exception_ptr error_;   // guarded by mutex_
  std::thread thread_;         // last: starts after the members it uses exist
};

}  // namespace

struct DataParallel::State : std::enable_shared_from_this<State> {
  std::vector<torch::Device> devices;
  torch::Device output_device{torch::kCPU};
  std::vector<torch::nn::AnyModule> replicas;
  std::vector<std::vector<at::Tensor>> params;                       // [replica][parameter]
  std::vector<std::vector<at::Tensor>> buffers;                      // [replica][buffer]
  std::vector<std::unique_ptr<ReplicaWorker>> workers;               // [replica]; none for the primary
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;  // autograd holds them weakly
  std::mutex mutex;
  bool reduction_queued = false;  // guarded by mutex: this backward's callback is queued
  std::vector<std::function<void()>> listeners;

  void on_replica_gradient();
  void reduce_onto_primary();
};

DataParallel::DataParallel(const std::function<torch::nn::AnyModule()>& make_replica,
                           std::vector<torch::Device> devices, std::optional<torch::Device> output_device)
    : state_(std::make_shared<State>()) {
  if (devices.empty()) throw InvalidArgumentError("DataParallel: no devices given");
  State& s = *state_;
  s.devices = std::move(devices);
  s.output_device = output_device.value_or(s.devices[0]);
  for (size_t i = 0; i < s.devices.size(); ++i) {
    torch::nn::AnyModule replica = make_replica();
    replica.ptr()->to(s.devices[i]);
    s.params.push_back(replica.ptr()->parameters());
    s.buffers.push_back(replica.ptr()->buffers());
    if (s.params[i].size() != s.params[0].size() || s.buffers[i].size() != s.buffers[0].size()) {
      throw InvalidArgumentError(str_cat("DataParallel: replica ", i, " has ", s.params[i].size(),
                                         " parameters, replica 0 has ", s.params[0].size(),
                                         "; make_replica must build the same model every time"));
    }
    s.replicas.push_back(std::move(replica));
    s.workers.push_back(i == 0 ? nullptr : std::make_unique<ReplicaWorker>());
  }
  std::weak_ptr<State> weak = state_;
  // Every replica, the primary included: with one device the end-of-backward callback must
  // still run for the listeners.
  for (size_t i = 0; i < s.replicas.size(); ++i) {
    for (auto& p : s.params[i]) {
      if (!p.requires_grad()) continue;
      auto accumulator = torch::autograd::impl::grad_accumulator(p);
      accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
          [weak](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
            if (auto state = weak.lock()) state->on_replica_gradient();
            return outputs;
          }));
      s.accumulators.push_back(std::move(accumulator));
    }
  }
  sync_replicas();
}

DataParallel::~DataParallel() = default;

torch::nn::Module& DataParallel::module() { return *state_->replicas[0].ptr(); }
torch::nn::Module& DataParallel::replica(size_t index) { return *state_->replicas.at(index).ptr(); }
size_t DataParallel::replica_count() const { return state_->replicas.size(); }

void DataParallel::sync_replicas() {
  State& s = *state_;
  torch::NoGradGuard no_grad;
  for (size_t i = 1; i < s.replicas.size(); ++i) {
    for (size_t k = 0; k < s.params[0].size(); ++k) s.params[i][k].copy_(s.params[0][k]);
    for (size_t k = 0; k < s.buffers[0].size(); ++k) s.buffers[i][k].copy_(s.buffers[0][k]);
  }
}

torch::Tensor DataParallel::forward(const torch::Tensor& input) {
  State& s = *state_;
  sync_replicas();
  const int64_t batch = input.size(0);
  const int64_t used = std::max<int64_t>(1, std::min<int64_t>(batch, static_cast<int64_t>(s.replicas.size())));
  std::vector<torch::Tensor> chunks = input.chunk(used, 0);
  std::vector<torch::Tensor> outputs(chunks.size());
  const bool grad_enabled = torch::GradMode::is_enabled();
  auto run = [&](size_t i) {
    torch::AutoGradMode mode(grad_enabled);  // grad mode is per thread
    outputs[i] = s.replicas[i].forward(chunks[i].to(s.devices[i])).to(s.output_device);
  };
  for (size_t i = 1; i < chunks.size(); ++i) s.workers[i]->start([&run, i] { run(i); });
  std::exception_ptr failure;
  try {
    run(0);
  } catch (...) {
    failure = std::current_exception();
  }
  for (size_t i = 1; i < chunks.size(); ++i) {
    try {
      s.workers[i]->finish();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  return torch::cat(outputs, 0);
}

void DataParallel::State::on_replica_gradient() {
  std::lock_guard<std::mutex> lock(mutex);
  if (reduction_queued) return;
  reduction_queued = true;
  std::weak_ptr<State> weak = weak_from_this();
  torch::autograd::Engine::get_default_engine().queue_callback([weak] {
    if (auto state = weak.lock()) state->reduce_onto_primary();
  });
}

namespace {

// sum += addend. Float32 CUDA gradients are summed with cuBLAS (axpy) on the current stream,
// where the copy from the replica's device was queued; everything else with LibTorch.
void add_gradient(at::Tensor& sum, const at::Tensor& addend) {
#ifdef RINGTORCH_WITH_CUDA
  if (sum.is_cuda() && sum.scalar_type() == at::kFloat && addend.scalar_type() == at::kFloat && sum.is_contiguous() &&
      addend.is_contiguous() && sum.device() == addend.device()) {
    cuda::add_scaled(sum.data_ptr<float>(), addend.data_ptr<float>(), sum.numel(), 1.0f,
                     current_cuda_stream(sum.device()));
    return;
  }
#endif
  sum.add_(addend);
}

}  // namespace

void DataParallel::State::reduce_onto_primary() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    reduction_queued = false;
  }
  torch::NoGradGuard no_grad;
  for (size_t k = 0; k < params[0].size(); ++k) {
    at::Tensor& primary = params[0][k];
    for (size_t i = 1; i < params.size(); ++i) {
      at::Tensor& grad = params[i][k].mutable_grad();
      if (!grad.defined()) continue;
      at::Tensor moved = grad.to(primary.device());
      if (primary.grad().defined()) {
        add_gradient(primary.mutable_grad(), moved);
      } else {
        primary.mutable_grad() = moved.clone();
      }
      grad = at::Tensor();  // the replica starts the next backward without a gradient
    }
  }
  for (auto& listener : listeners) listener();
}

void DataParallel::add_backward_listener(std::function<void()> listener) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->listeners.push_back(std::move(listener));
}

}  // namespace ringtorch
