#include "runtime/comm/operation_queue.h"

#include "base/error.h"
#include "runtime/comm/tag_space.h"

namespace ringtorch {

OperationQueue::OperationQueue(std::string prefix, std::string group, Executor executor)
    : prefix_(std::move(prefix)), group_(std::move(group)), executor_(std::move(executor)) {
  worker_ = std::thread(&OperationQueue::worker_loop, this);
}

OperationQueue::~OperationQueue() { stop(); }

void OperationQueue::check_open(const char* op) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) throw InvalidArgumentError(str_cat(prefix_, op, " on group '", group_, "' after shutdown()"));
}

std::exception_ptr OperationQueue::broken() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return broken_;
}

OperationQueue::Task OperationQueue::make_task(Operation op) {
  const char* name = op_type_name(op.call.op);
  if (stopping_) throw InvalidArgumentError(str_cat(prefix_, name, " on group '", group_, "' after shutdown()"));
  const uint32_t sequence = next_sequence_++;
  Task task;
  task.work = std::make_shared<Work>(str_cat(prefix_, name, " #", sequence, " (group ", group_, ", ", op.detail, ")"),
                                     std::move(op.tensors), op.timeout + kWaitGrace);
  task.tag = operation_tag(sequence);
  task.op = std::move(op);
  if (broken_) task.work->finish(broken_);
  return task;
}

std::shared_ptr<Work> OperationQueue::submit(Operation op) {
  std::shared_ptr<Work> work;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Task task = make_task(std::move(op));
    work = task.work;
    if (work->is_completed()) return work;  // the group is broken
    queue_.push_back(std::move(task));
  }
  wake_.notify_one();
  return work;
}

void OperationQueue::run(Operation op) {
  std::shared_ptr<Work> work;
  std::optional<Task> here;  // runs on this thread: nothing is queued ahead of it
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Task task = make_task(std::move(op));
    work = task.work;
    if (!work->is_completed()) {
      if (!running_ && queue_.empty()) {
        running_ = true;
        here = std::move(task);
      } else {
        queue_.push_back(std::move(task));
      }
    }
  }
  if (here) {
    execute(*here);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_ = false;
    }
  }
  wake_.notify_one();  // the worker: for what was queued behind, or for this operation
  work->wait();
}

void OperationQueue::worker_loop() {
  while (true) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return !running_ && (stopping_ || !queue_.empty()); });
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

void OperationQueue::execute(Task& task) {
  Outcome outcome;
  if (auto failure = broken()) {
    outcome.error = failure;  // broke while this operation waited in line
  } else {
    task.work->mark_started();
    outcome = executor_(task.op, task.tag, *task.work);
    if (outcome.error && outcome.breaks_group) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!broken_) broken_ = outcome.error;
    }
  }
  task.work->finish(outcome.error);
}

void OperationQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

}  // namespace ringtorch
