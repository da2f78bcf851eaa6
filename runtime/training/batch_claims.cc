#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <utility>

#include <ringtorch/batch_claims.h>
#include <ringtorch/error.h>
#include <ringtorch/str_cat.h>

namespace ringtorch {
namespace {

// One add on the counter `key`; a store failure becomes PeerLostError naming the rank and period.
int64_t add_to(c10d::Store& store, const std::string& key, int64_t value, int rank, int64_t period) {
  try {
    return store.add(key, value);
  } catch (const std::exception& e) {
    throw PeerLostError(
        str_cat("rank ", rank, ": claiming a batch of period ", period, " from the group's store failed: ", e.what()),
        FailureSite{rank, -1, "store add " + key});
  }
}

}  // namespace

bool claims_another(int64_t left, double others_per_mine, bool fastest) {
  if (left < 1) return false;
  return fastest || static_cast<double>(left) >= others_per_mine;
}

BatchClaims::BatchClaims(ProcessGroup& group) : group_(group), store_(group.store()) {
  // Another run over the same store (a Redis server outlives jobs; an in-process recovery makes
  // a new one) must not share the counters.
  int64_t run = 0;
  if (group.rank() == 0) {
    std::mt19937_64 random(std::random_device{}());
    run = std::uniform_int_distribution<int64_t>(0, INT64_MAX)(random);
  }
  group.broadcast(&run, 1, c10::ScalarType::Long, /*root=*/0);
  run_ = str_cat("claims/", run, "/");
}

std::string BatchClaims::key(int64_t period) const { return str_cat(run_, period); }

void BatchClaims::begin_period(int64_t batches, const std::vector<double>& weights) {
  const auto size = static_cast<size_t>(group_.size());
  const auto bad = [](double w) { return !std::isfinite(w) || w < 0; };
  if (batches < 0 || weights.size() != size || std::any_of(weights.begin(), weights.end(), bad)) {
    throw InvalidArgumentError(str_cat("rank ", group_.rank(), ": BatchClaims::begin_period: ", batches,
                                       " batches and ", weights.size(), " weights for ", size,
                                       " ranks; give batches >= 0 and one finite weight >= 0 per rank"));
  }
  ahead_ = std::future<int64_t>();  // a period left before its end (by an error): its claim is dropped
  ++period_;
  if (group_.rank() == 0 && period_ >= 2) delete_period(period_ - 2);
  // A rank that claimed nothing for kMaxPeriodsWithout periods takes the first batch it can, so
  // that its speed keeps being measured (the balancer needs samples from every rank to move the
  // weights) and a rank that sped up is seen to have.
  periods_without_ = claimed_ > 0 || period_ == 0 ? 0 : periods_without_ + 1;
  batches_ = batches;
  claimed_ = 0;
  over_ = false;
  expected_left_ = batches;
  const auto me = static_cast<size_t>(group_.rank());
  const size_t fastest = static_cast<size_t>(std::max_element(weights.begin(), weights.end()) - weights.begin());
  fastest_ = fastest == me;
  double others = 0;
  for (size_t r = 0; r < size; ++r) others += r == me ? 0 : weights[r];
  // A rank of weight 0 (weights start equal: not one that was not measured yet) leaves the rest to the others.
  others_per_mine_ = weights[me] > 0 ? others / weights[me] : HUGE_VAL;
}

std::optional<int64_t> BatchClaims::next() {
  if (over_) return std::nullopt;
  const bool overdue = claimed_ == 0 && periods_without_ >= kMaxPeriodsWithout;
  // Far from the end, claim at once: the others cannot have used up the rest since the last claim.
  if (!ahead_.valid() && !fastest_ && !overdue && static_cast<double>(expected_left_) < 2 * others_per_mine_ + 1 &&
      !claims_another(batches_ - add(0), others_per_mine_, false)) {
    over_ = true;
    return std::nullopt;
  }
  const int64_t batch = (ahead_.valid() ? claimed_ahead() : add(1)) - 1;
  if (batch >= batches_) {
    over_ = true;
    return std::nullopt;
  }
  ++claimed_;
  const double left_then = static_cast<double>(batches_ - batch - 1) - others_per_mine_;
  expected_left_ = static_cast<int64_t>(std::max(0.0, std::floor(left_then)));
  // The next claim travels while this batch trains, where it is sure to be made: on the fastest
  // rank always, on another while far from the end. A round trip to the store's host costs about
  // a millisecond on a busy machine (docs/benchmarks.md), a tenth of a small model's step.
  if (fastest_ || static_cast<double>(expected_left_) >= 2 * others_per_mine_ + 1) claim_ahead();
  return batch;
}

void BatchClaims::finish() {
  ahead_ = std::future<int64_t>();
  if (group_.rank() != 0) return;
  for (int64_t period = std::max<int64_t>(0, period_ - 1); period <= period_; ++period) delete_period(period);
}

int64_t BatchClaims::add(int64_t value) { return add_to(*store_, key(period_), value, group_.rank(), period_); }

// A thread of its own that owns copies of what it uses, so that neither this object's end nor an
// error that leaves the period waits for it (its add is bounded by the store's own timeout).
void BatchClaims::claim_ahead() {
  std::promise<int64_t> promise;
  ahead_ = promise.get_future();
  std::thread([store = store_, key = key(period_), rank = group_.rank(), period = period_,
               promise = std::move(promise)]() mutable {
    try {
      promise.set_value(add_to(*store, key, 1, rank, period));
    } catch (...) {
      promise.set_exception(std::current_exception());
    }
  }).detach();
}

int64_t BatchClaims::claimed_ahead() {
  std::future<int64_t> ahead = std::move(ahead_);
  if (ahead.wait_for(group_.timeout()) != std::future_status::ready) {
    throw TimeoutError(str_cat("rank ", group_.rank(), ": claiming a batch of period ", period_,
                               " from the group's store took longer than the group's timeout (",
                               format_duration_ms(group_.timeout().count()),
                               "): is the store's host overloaded or gone? (raise --timeout)"),
                       FailureSite{group_.rank(), -1, "store add " + key(period_)});
  }
  return ahead.get();
}

void BatchClaims::delete_period(int64_t period) {
  try {
    store_->deleteKey(key(period));
  } catch (const std::exception& e) {
    throw PeerLostError(
        str_cat("rank 0: deleting the batch counter of period ", period, " from the group's store failed: ", e.what()),
        FailureSite{0, -1, "store delete " + key(period)});
  }
}

}  // namespace ringtorch
