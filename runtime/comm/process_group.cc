#include "runtime/comm/process_group.h"

#include <ATen/ATen.h>
#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "rendezvous/error.h"
#include "rendezvous/gloo_store.h"
#include "rendezvous/init_method.h"
#include "rendezvous/rendezvous.h"
#include "rendezvous/store_wait.h"
#include "runtime/comm/chunk_plan.h"
#ifdef RINGTORCH_WITH_CUDA
#include "runtime/comm/cuda_tensor_staging.h"
#endif
#include "runtime/comm/failure_report.h"
#include "runtime/comm/reduce_kernels.h"
#include "runtime/comm/shm/host_plan.h"
#include "runtime/comm/shm/same_host_path.h"
#include "runtime/comm/socket_device.h"
#include "runtime/comm/tensor_checks.h"
#include "runtime/cuda/staged_transfer.h"

namespace ringtorch {
namespace {

// The tag of the one collective create() runs; operations count their tags up from 0.
constexpr uint32_t kCreationTag = 0xFFFFFF00u;

std::chrono::milliseconds resolve_timeout(const ProcessGroupOptions& options, std::chrono::milliseconds fallback) {
  if (options.timeout) return *options.timeout;
  if (const char* env = std::getenv("RINGTORCH_TIMEOUT"); env && *env) {
    return parse_seconds(env, "environment variable RINGTORCH_TIMEOUT");
  }
  return fallback;
}

// Set by run_sync while its operation is being submitted: submit() then leaves the worker
// asleep, because the calling thread is about to run the operation itself.
thread_local const ProcessGroup* deferred_wake_up = nullptr;

// Set while a group creates its cross-host subgroups: they neither plan shared memory (one
// rank per host) nor announce their path.
thread_local bool creating_cross_host_groups = false;

bool shared_memory_enabled(const ProcessGroupOptions& options) {
  if (options.shared_memory) return *options.shared_memory;
  const char* env = std::getenv("RINGTORCH_SHM");
  return !(env && std::string(env) == "0");
}

}  // namespace

ProcessGroup::ProcessGroup(int rank, int size, std::string name, std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), name_(std::move(name)), timeout_(timeout) {}

std::shared_ptr<ProcessGroup> ProcessGroup::create(const Rendezvous& rdzv, ProcessGroupOptions options) {
  if (!options.timeout) options.timeout = rdzv.timeout;
  if (options.segment_tag.empty()) options.segment_tag = str_cat(rdzv.run_id, "-", rdzv.restart, "-", rdzv.round);
  return create(rdzv.store, rdzv.rank, rdzv.world_size, rdzv.master_addr, std::move(options));
}

std::shared_ptr<ProcessGroup> ProcessGroup::create(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                                                   const std::string& store_host, ProcessGroupOptions options) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw InvalidArgumentError(str_cat("ProcessGroup: rank ", rank, " is outside [0, ", size, ")"));
  }
  const auto timeout = resolve_timeout(options, kDefaultTimeout);
  std::shared_ptr<ProcessGroup> group(new ProcessGroup(rank, size, options.name, timeout));
  DeviceChoice choice = make_device(options.transport, options.iface, store_host);
  group->network_ = choice.why;
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(timeout);
  auto group_store = c10::make_intrusive<c10d::PrefixStore>("gloo/" + options.name, store);
  GlooStore gloo_store(group_store);
  try {
    context->connectFullMesh(gloo_store, choice.device);
    publish_peer_addresses(*group_store, *context);
  } catch (const Error& e) {
    throw TimeoutError(
        str_cat(group->context_prefix(), "connecting group '", options.name, "' over ", choice.why, ": ", e.what()));
  } catch (const std::exception& e) {
    throw PeerLostError(str_cat(group->context_prefix(), "connecting group '", options.name, "' over ", choice.why,
                                " failed: ", e.what(), "; check that every rank can reach this address (firewall, ",
                                "RINGTORCH_SOCKET_IFNAME), or ", kRaiseTimeoutHint));
  }
  group->context_ = context;
  group->store_ = store;
  group->group_store_ = group_store;
  group->store_host_ = store_host;
  if (options.allreduce_algorithm) {
    group->allreduce_algorithm_ = *options.allreduce_algorithm;
  } else if (const char* algorithm = std::getenv("RINGTORCH_ALLREDUCE_ALGORITHM")) {
    group->allreduce_algorithm_ = parse_allreduce_algorithm(algorithm, "RINGTORCH_ALLREDUCE_ALGORITHM");
  }
  if (options.debug_detail) {
    group->detail_ = *options.debug_detail;
  } else if (const char* debug = std::getenv("RINGTORCH_DEBUG")) {
    group->detail_ = std::string(debug) == "DETAIL";
  }
  // Pieces (chunk_plan.h) exist so that a rank staging CUDA tensors can overlap its copies, and
  // every rank must cut alike; a group where no rank sees a GPU keeps whole buffers, which
  // measured 10-20% faster over TCP at 64 MiB. So the ranks agree once, here.
  if (options.allreduce_piece_bytes) {
    group->allreduce_piece_bytes_ = std::max<size_t>(1, *options.allreduce_piece_bytes);
  } else if (size > 1) {
    int32_t any_cuda = at::hasCUDA() ? 1 : 0;
    try {
      allreduce_buffer(context, &any_cuda, 1, sizeof(any_cuda), reduce_function(ReduceOp::kMax, at::kInt),
                       AllreduceAlgorithm::kDirect, kCreationTag, timeout, *group->scratch_);
    } catch (const std::exception& e) {
      std::rethrow_exception(classify_failure(
          str_cat(group->context_prefix(), "creating group '", options.name, "' (agreeing whether any rank has a GPU)"),
          e, timeout));
    }
    if (any_cuda) group->allreduce_piece_bytes_ = kAllreduceChunkBytes;
  }
  if (creating_cross_host_groups) {
    group->path_ = "Gloo over TCP (the cross-host part of a hierarchical group)";
  } else if (size > 1) {
    const std::string tag =
        (options.segment_tag.empty() ? std::string("group") : options.segment_tag) + "-" + options.name;
    std::string identity = options.host_identity;
    if (const char* env = std::getenv("RINGTORCH_HOST_ID"); identity.empty() && env && *env) identity = env;
    HostPlan plan = plan_hosts(*group_store, rank, size, tag, shared_memory_enabled(options),
                               identity.empty() ? host_identity() : identity);
    group->path_ = plan.why;
    group->local_ = std::move(plan.local);
    if (group->local_ && plan.hosts > 1) {
      creating_cross_host_groups = true;
      try {
        for (size_t i = 0; i < plan.cross_host_groups.size(); ++i) {
          ProcessGroupOptions cross = options;
          cross.name = str_cat(options.name, ".hosts", i);
          auto subgroup = group->new_group(plan.cross_host_groups[i], cross);
          if (subgroup->is_member()) group->cross_host_ = subgroup;
        }
      } catch (...) {
        creating_cross_host_groups = false;
        throw;
      }
      creating_cross_host_groups = false;
    }
    if (group->local_) {
      auto path = std::make_shared<SameHostPath>();
      path->local = group->local_.get();
      path->cross_host = group->cross_host_.get();
      path->rank = rank;
      path->host_of_rank = plan.host_of_rank;
      path->local_index_of_rank = plan.local_index_of_rank;
      group->same_host_ = path;
    }
    if (rank == 0) std::fprintf(stderr, "[ringtorch] group '%s': %s\n", options.name.c_str(), group->path_.c_str());
  } else {
    group->path_ = "a group of one rank: nothing to exchange";
  }
  group->worker_ = std::thread(&ProcessGroup::worker_loop, group.get());
  return group;
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(const std::vector<int>& ranks, ProcessGroupOptions options) {
  check_member("new_group");
  std::string list;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size_ || (i > 0 && ranks[i] <= ranks[i - 1])) {
      throw InvalidArgumentError(str_cat(context_prefix(), "new_group: ranks must be increasing and in [0, ", size_,
                                         "); got rank ", ranks[i], " at position ", i));
    }
    list += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  if (ranks.empty()) throw InvalidArgumentError(context_prefix() + "new_group: no ranks given");
  // Every rank counts its new_group calls the same way: the count names the subgroup's keys.
  const int index = subgroups_created_++;
  if (options.name == "default") options.name = str_cat(name_, ".sub", index);
  if (!options.timeout) options.timeout = timeout_;
  auto it = std::find(ranks.begin(), ranks.end(), rank_);
  if (it == ranks.end()) {
    std::shared_ptr<ProcessGroup> outsider(new ProcessGroup(rank_, size_, options.name, *options.timeout));
    outsider->member_ = false;
    outsider->members_ = list;
    return outsider;
  }
  auto scoped = c10::make_intrusive<c10d::PrefixStore>(str_cat("subgroup", index), store_);
  auto group = create(scoped, static_cast<int>(it - ranks.begin()), static_cast<int>(ranks.size()), store_host_,
                      std::move(options));
  group->members_ = list;
  return group;
}

void ProcessGroup::check_member(const char* op) const {
  if (!member_) {
    throw InvalidArgumentError(str_cat("[rank ", rank_, "] ", op, ": this rank is not a member of group '", name_,
                                       "' (ranks ", members_, "); only they may call into it"));
  }
}

ProcessGroup::~ProcessGroup() { shutdown(); }

std::exception_ptr ProcessGroup::classify_failure(const std::string& description, const std::exception& e,
                                                  std::chrono::milliseconds timeout, const std::string& peer) {
  // Gloo's IoException covers both a peer that closed its connection and an operation that ran
  // past its timeout; its text says which (and names the peer's address when it knows it).
  const std::string what = e.what();
  const bool timed_out = what.find("Timed out") != std::string::npos || what.find("timed out") != std::string::npos;
  const std::string message =
      str_cat(description, timed_out ? " timed out" : " lost a peer", " after at most ",
              format_duration_ms(timeout.count()), ": ", what, peer.empty() ? "" : "; " + peer,
              timed_out ? "; a rank stopped, died, or did not call this collective (all ranks must call the same "
                          "collectives in the same order); "
                        : "; a peer process died or its connection broke: check the other ranks' logs; ",
              "the group is now broken: recreate it; ", kRaiseTimeoutHint);
  return timed_out ? std::make_exception_ptr(TimeoutError(message)) : std::make_exception_ptr(PeerLostError(message));
}

void ProcessGroup::check_root(const char* op, int root) const {
  if (root < 0 || root >= size_) {
    throw InvalidArgumentError(str_cat(context_prefix(), op, ": root rank ", root, " is outside [0, ", size_, ")"));
  }
}

void ProcessGroup::check_reduce_op(const char* op, ReduceOp reduce, const at::Tensor& t) const {
  if (reduce == ReduceOp::kAvg && !at::isFloatingType(t.scalar_type())) {
    throw InvalidArgumentError(
        str_cat(context_prefix(), op, ": avg of ", dtype_name(t), " is not defined; use sum and divide"));
  }
}

void ProcessGroup::check_peer(const char* op, int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    throw InvalidArgumentError(str_cat(context_prefix(), op, ": peer rank ", peer, " must be in [0, ", size_,
                                       ") and not this rank (", rank_, ")"));
  }
}

std::string ProcessGroup::context_prefix() const { return str_cat("[rank ", rank_, "/", size_, "] "); }

void ProcessGroup::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  context_.reset();
  same_host_.reset();
  local_.reset();
  if (cross_host_) cross_host_->shutdown();
}

std::shared_ptr<Work> ProcessGroup::submit(const CallSignature& call, const std::string& detail,
                                           std::vector<at::Tensor> tensors, std::chrono::milliseconds timeout,
                                           std::function<void(uint32_t)> run, DeviceStaging staging) {
  const std::string& op = call.op;
  if (staging.copies_back()) {
    run = [run = std::move(run), staging = std::move(staging)](uint32_t tag) {
      run(tag);
      staging.copy_back();
    };
  }
  std::shared_ptr<Work> work;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      throw InvalidArgumentError(str_cat(context_prefix(), op, " on group '", name_, "' after shutdown()"));
    }
    const uint32_t sequence = next_sequence_++;
    // Wait a little longer than the operation's own timeout, so that Gloo's error (which
    // says what broke) is what the caller sees.
    work = std::make_shared<Work>(str_cat(context_prefix(), op, " #", sequence, " (group ", name_, ", ", detail, ")"),
                                  std::move(tensors), timeout + std::chrono::seconds(2));
    if (broken_) {
      work->finish(broken_);
      return work;
    }
    queue_.push_back(Task{work, std::move(run), sequence, call, timeout});
  }
  if (deferred_wake_up != this) queue_cv_.notify_one();
  return work;
}

void ProcessGroup::run_sync(const std::function<std::shared_ptr<Work>()>& submit_async) {
  std::shared_ptr<Work> work;
  deferred_wake_up = this;
  try {
    work = submit_async();
  } catch (...) {
    deferred_wake_up = nullptr;
    throw;
  }
  deferred_wake_up = nullptr;
  std::optional<Task> mine;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!running_ && !queue_.empty() && queue_.front().work == work) {
      mine = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
  }
  if (!mine) {
    queue_cv_.notify_one();  // the wake-up submit() skipped
    work->wait();
    return;
  }
  execute(*mine);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = false;
  }
  queue_cv_.notify_one();  // others may have queued behind us meanwhile
  work->wait();
}

void ProcessGroup::worker_loop() {
  while (true) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queue_cv_.wait(lock, [&] { return (stopping_ && !running_) || (!queue_.empty() && !running_); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      task = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    execute(task);
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = false;
  }
}

void ProcessGroup::execute(Task& task) {
  std::exception_ptr failure;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    failure = broken_;
  }
  if (!failure) {
    task.work->mark_started();
    try {
      if (detail_) check_signatures_agree(task.call, task.work->description(), task.tag);
      task.run(task.tag);
    } catch (const MismatchError& e) {
      // The shared-memory path compares calls itself; say which call, as DETAIL mode does.
      const std::string what = e.what();
      failure = what.rfind("shared memory:", 0) == 0
                    ? std::make_exception_ptr(MismatchError(task.work->description() + ": " + what))
                    : std::current_exception();
    } catch (const Error&) {
      failure = std::current_exception();
    } catch (const std::exception& e) {
      // The direct algorithm already names the rank it waited for; Gloo's own ones do not.
      const std::string what = e.what();
      const std::string peer = what.find("peer rank ") != std::string::npos
                                   ? ""
                                   : name_failed_peer(group_store_, rank_, size_, what, task.work->description(),
                                                      std::min(task.timeout, std::chrono::milliseconds(2000)));
      failure = classify_failure(task.work->description(), e, task.timeout, peer);
      std::lock_guard<std::mutex> lock(mutex_);
      broken_ = failure;
    }
  }
  task.work->finish(failure);
}

namespace {

// The operations DETAIL mode can name, by code.
const char* const kOperationNames[] = {"allreduce", "broadcast", "allgather",      "barrier",  "reduce",
                                       "gather",    "scatter",   "reduce_scatter", "alltoall", "allgatherv"};

int64_t operation_code(const std::string& op) {
  for (size_t i = 0; i < std::size(kOperationNames); ++i) {
    if (op == kOperationNames[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

std::string describe_signature(const int64_t* s) {
  const int64_t code = s[0];
  std::string text = code >= 0 && code < static_cast<int64_t>(std::size(kOperationNames)) ? kOperationNames[code] : "?";
  if (code == 3) return text;  // barrier carries no data
  const auto dtype = static_cast<c10::ScalarType>(s[2]);
  text += str_cat(" of ", s[1], " ", dtype_name(dtype));
  if (s[3] >= 0) text += str_cat(" (root ", s[3], ")");
  if (code == 0 || code == 4 || code == 7) text += str_cat(" ", reduce_op_name(static_cast<ReduceOp>(s[4])));
  return text;
}

}  // namespace

void ProcessGroup::check_signatures_agree(const CallSignature& call, const std::string& description, uint32_t tag) {
  constexpr int kFields = 5;
  int64_t mine[kFields] = {operation_code(call.op), call.count, static_cast<int64_t>(call.dtype), call.root,
                           static_cast<int64_t>(call.reduce)};
  std::vector<int64_t> all(static_cast<size_t>(kFields) * size_);
  gloo::AllgatherOptions opts(context_);
  opts.setInput<int64_t>(mine, kFields);
  opts.setOutput<int64_t>(all.data(), all.size());
  opts.setTag(tag | 0x80000000u);  // its own tag space: never collides with the collective's
  opts.setTimeout(timeout_);
  gloo::allgather(opts);
  std::string differing;
  for (int r = 0; r < size_; ++r) {
    if (!std::equal(mine, mine + kFields, all.data() + r * kFields)) {
      differing += str_cat("; rank ", r, " called ", describe_signature(all.data() + r * kFields));
    }
  }
  if (!differing.empty()) {
    throw MismatchError(str_cat(description, ": ranks disagree (RINGTORCH_DEBUG=DETAIL): this rank called ",
                                describe_signature(mine), differing,
                                "; every rank must call the same collectives, in the same order, with the same "
                                "sizes and dtypes"));
  }
}

std::shared_ptr<Work> ProcessGroup::allreduce_async(at::Tensor tensor, ReduceOp op,
                                                    std::optional<std::chrono::milliseconds> call_timeout) {
  check_member("allreduce");
  check_tensor(context_prefix(), "allreduce", "", tensor);
  check_reduce_op("allreduce", op, tensor);
  const at::Tensor user_tensor = tensor;
  // Every rank cuts a large buffer into the same pieces (chunk_plan.h), whatever its device: a
  // CUDA rank overlaps its copies with the reduction of other pieces, and CPU ranks in the same
  // group issue the same collectives (whole buffers where no rank has a GPU: see create()).
  const std::vector<ChunkSpan> pieces =
      plan_chunks(static_cast<size_t>(tensor.numel()), tensor.element_size(), allreduce_piece_bytes_);
  DeviceStaging staging;
  std::shared_ptr<cuda::StagedTransfer> transfer;
#ifdef RINGTORCH_WITH_CUDA
  if (tensor.is_cuda()) {
    transfer = stage_cuda_tensor(tensor, pieces, /*copy_in=*/true);
    tensor = host_view(*transfer, tensor);
  }
#endif
  tensor = staging.host(tensor, /*copy_in=*/true, /*copy_back=*/true);  // CUDA without the toolkit
  auto reduce = reduce_function(op, tensor.scalar_type());
  auto context = context_;
  const auto timeout = call_timeout.value_or(timeout_);
  const int size = size_;
  auto scratch = scratch_;
  const AllreduceAlgorithm requested = allreduce_algorithm_;
  // A forced algorithm (not auto) is a request for Gloo's.
  auto same_host = requested == AllreduceAlgorithm::kAuto ? same_host_ : nullptr;
  const size_t element_size = tensor.element_size();
  const auto first_algorithm = choose_allreduce_algorithm(requested, pieces[0].count * element_size, size_);
  const std::string detail = str_cat(tensor_summary(tensor), " ", reduce_op_name(op), ", ",
                                     !same_host    ? allreduce_algorithm_name(first_algorithm)
                                     : cross_host_ ? "hierarchical"
                                                   : "shared memory",
                                     pieces.size() > 1 ? str_cat(", ", pieces.size(), " pieces") : std::string(),
                                     transfer ? ", staged from the GPU" : "");
  // Averages of float32 CUDA tensors are divided on the device (cuBLAS), others on the host.
  const bool scale_on_device = transfer && op == ReduceOp::kAvg && tensor.scalar_type() == at::kFloat;
  return submit(
      {"allreduce", tensor.numel(), tensor.scalar_type(), -1, op}, detail, {user_tensor}, timeout,
      [=](uint32_t tag) mutable {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        at::Tensor flat = tensor.view(-1);
        for (size_t k = 0; k < pieces.size(); ++k) {
          if (transfer) transfer->wait_in(k, deadline);
          at::Tensor piece =
              flat.narrow(0, static_cast<int64_t>(pieces[k].first), static_cast<int64_t>(pieces[k].count));
          if (same_host) {
            same_host->allreduce(piece, op, reduce, timeout);
          } else {
            allreduce_buffer(context, piece.data_ptr(), pieces[k].count, element_size, reduce,
                             choose_allreduce_algorithm(requested, pieces[k].count * element_size, size), tag, timeout,
                             *scratch);
          }
          if (op == ReduceOp::kAvg && !scale_on_device) piece.div_(size);
          if (transfer) transfer->copy_out(k, scale_on_device ? 1.0f / static_cast<float>(size) : 1.0f);
        }
        if (transfer) transfer->finish(deadline);
      },
      std::move(staging));
}

std::shared_ptr<Work> ProcessGroup::broadcast_async(at::Tensor tensor, int root,
                                                    std::optional<std::chrono::milliseconds> call_timeout) {
  check_member("broadcast");
  check_tensor(context_prefix(), "broadcast", "", tensor);
  check_root("broadcast", root);
  DeviceStaging staging;
  const at::Tensor user_tensor = tensor;
  tensor = staging.host(tensor, /*copy_in=*/rank_ == root, /*copy_back=*/rank_ != root);
  auto context = context_;
  const auto timeout = call_timeout.value_or(timeout_);
  auto same_host = same_host_;
  return submit(
      {"broadcast", tensor.numel(), tensor.scalar_type(), root}, str_cat(tensor_summary(tensor), " from rank ", root),
      {user_tensor}, timeout,
      [=](uint32_t tag) {
        if (tensor.numel() == 0) return;
        if (same_host) return same_host->broadcast(tensor, root, timeout);
        gloo::BroadcastOptions opts(context);
        opts.setOutput<uint8_t>(data_as<uint8_t>(tensor), tensor.nbytes());
        opts.setRoot(root);
        opts.setTag(tag);
        opts.setTimeout(timeout);
        gloo::broadcast(opts);
      },
      std::move(staging));
}

std::shared_ptr<Work> ProcessGroup::allgather_async(at::Tensor input, at::Tensor output,
                                                    std::optional<std::chrono::milliseconds> call_timeout) {
  check_member("allgather");
  check_tensor(context_prefix(), "allgather", "input", input);
  check_tensor(context_prefix(), "allgather", "output", output);
  check_blocks(context_prefix(), "allgather", input, "input", output, "output", size_);
  DeviceStaging staging;
  const std::vector<at::Tensor> user_tensors{input, output};
  input = staging.host(input, /*copy_in=*/true, /*copy_back=*/false);
  output = staging.host(output, /*copy_in=*/false, /*copy_back=*/true);
  auto context = context_;
  const auto timeout = call_timeout.value_or(timeout_);
  auto same_host = same_host_;
  return submit(
      {"allgather", input.numel(), input.scalar_type()}, str_cat(tensor_summary(input), " per rank"), user_tensors,
      timeout,
      [=](uint32_t tag) {
        if (input.numel() == 0) return;
        if (same_host) return same_host->allgather(input, output, timeout);
        gloo::AllgatherOptions opts(context);
        opts.setInput<uint8_t>(data_as<uint8_t>(input), input.nbytes());
        opts.setOutput<uint8_t>(data_as<uint8_t>(output), output.nbytes());
        opts.setTag(tag);
        opts.setTimeout(timeout);
        gloo::allgather(opts);
      },
      std::move(staging));
}

std::shared_ptr<Work> ProcessGroup::allgatherv_async(at::Tensor input, at::Tensor output, std::vector<int64_t> counts,
                                                     std::optional<std::chrono::milliseconds> call_timeout) {
  check_member("allgatherv");
  check_tensor(context_prefix(), "allgatherv", "input", input);
  check_tensor(context_prefix(), "allgatherv", "output", output);
  if (static_cast<int>(counts.size()) != size_) {
    throw InvalidArgumentError(
        str_cat(context_prefix(), "allgatherv: ", counts.size(), " counts given for ", size_, " ranks"));
  }
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  if (input.numel() != counts[rank_] || output.numel() != total || input.scalar_type() != output.scalar_type()) {
    throw InvalidArgumentError(str_cat(context_prefix(), "allgatherv: input has ", input.numel(), " ",
                                       dtype_name(input), " (counts[", rank_, "] = ", counts[rank_], "), output ",
                                       output.numel(), " ", dtype_name(output), " (sum of counts = ", total, ")"));
  }
  DeviceStaging staging;
  const std::vector<at::Tensor> user_tensors{input, output};
  input = staging.host(input, /*copy_in=*/true, /*copy_back=*/false);
  output = staging.host(output, /*copy_in=*/false, /*copy_back=*/true);
  auto context = context_;
  const auto timeout = call_timeout.value_or(timeout_);
  std::vector<size_t> bytes;
  for (int64_t c : counts) bytes.push_back(static_cast<size_t>(c) * input.element_size());
  return submit(
      {"allgatherv", total, input.scalar_type()}, str_cat(tensor_summary(output), " in all"), user_tensors, timeout,
      [=](uint32_t tag) {
        if (total == 0) return;
        gloo::AllgathervOptions opts(context);
        opts.setInput<uint8_t>(data_as<uint8_t>(input), input.nbytes());
        opts.setOutput<uint8_t>(data_as<uint8_t>(output), bytes);
        opts.setTag(tag);
        opts.setTimeout(timeout);
        gloo::allgatherv(opts);
      },
      std::move(staging));
}

at::Tensor ProcessGroup::as_tensor(void* data, int64_t count, c10::ScalarType dtype) {
  if (count < 0 || (data == nullptr && count > 0)) {
    throw InvalidArgumentError(str_cat("raw buffer: ", count, " elements at ", data, " is not a buffer"));
  }
  return at::from_blob(data, {count}, at::TensorOptions().dtype(dtype));
}

std::shared_ptr<Work> ProcessGroup::barrier_async(std::optional<std::chrono::milliseconds> call_timeout) {
  check_member("barrier");
  auto context = context_;
  const auto timeout = call_timeout.value_or(timeout_);
  auto same_host = same_host_;
  return submit({"barrier"}, str_cat(size_, " ranks"), {}, timeout, [=](uint32_t tag) {
    if (same_host) return same_host->barrier(timeout);
    gloo::BarrierOptions opts(context);
    opts.setTag(tag);
    opts.setTimeout(timeout);
    gloo::barrier(opts);
  });
}

}  // namespace ringtorch
