#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <utility>

#include <ringtorch/batch_claims.h>
#include <ringtorch/error.h>
#include <ringtorch/str_cat.h>

namespace ringtorch {
namespace {

// What a failed call on the counters was doing, for its error.
std::string claiming(int64_t period) { return str_cat("claiming a batch of period ", period); }
std::string deleting(int64_t period) { return str_cat("deleting the batch counter of period ", period); }

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
  // A rank that claimed nothing for kMaxPeriodsWithout periods asks for a batch whatever the
  // rule says, so that its speed keeps being measured (the balancer needs samples from every
  // rank to move the weights) and a rank that sped up is seen to have.
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
      !claims_another(batches_ - wait_for_add(add_async(0)), others_per_mine_, false)) {
    over_ = true;
    return std::nullopt;
  }
  const int64_t batch = wait_for_add(ahead_.valid() ? std::move(ahead_) : add_async(1)) - 1;
  if (batch >= batches_) {
    over_ = true;
    return std::nullopt;
  }
  ++claimed_;
  const double left_then = static_cast<double>(batches_ - batch - 1) - others_per_mine_;
  expected_left_ = static_cast<int64_t>(std::max(0.0, std::floor(left_then)));
  // The next claim travels while this batch trains, where it is sure to be made: on the fastest
  // rank always, on another while far from the end (a round trip to the store's host is a tenth
  // of a small model's step: docs/ARCHITECTURE.md).
  if (fastest_ || static_cast<double>(expected_left_) >= 2 * others_per_mine_ + 1) ahead_ = add_async(1);
  return batch;
}

void BatchClaims::finish() {
  ahead_ = std::future<int64_t>();
  if (group_.rank() != 0) return;
  for (int64_t period = std::max<int64_t>(0, period_ - 1); period <= period_; ++period) delete_period(period);
}

int64_t BatchClaims::wait_for_add(std::future<int64_t> call) const {
  return wait(std::move(call), claiming(period_), str_cat("store add ", key(period_)));
}

std::future<int64_t> BatchClaims::add_async(int64_t value) {
  return on_own_thread([key = key(period_), value](c10d::Store& store) { return store.add(key, value); },
                       claiming(period_), str_cat("store add ", key(period_)));
}

// A thread of its own that owns copies of what it uses, so that neither this object's end nor an
// error that leaves the period waits for it; the caller waits for its result no longer than the
// group's timeout (wait()), whatever the store's own timeout (300 s for Redis by default).
std::future<int64_t> BatchClaims::on_own_thread(std::function<int64_t(c10d::Store&)> call, std::string what,
                                                std::string site) {
  std::promise<int64_t> promise;
  std::future<int64_t> result = promise.get_future();
  std::thread([store = store_, call = std::move(call), what = std::move(what), site = std::move(site),
               rank = group_.rank(), promise = std::move(promise)]() mutable {
    // Nothing may leave a detached thread: every failure goes to the waiting rank.
    try {
      promise.set_value(call(*store));
    } catch (const std::exception& e) {
      try {
        promise.set_exception(std::make_exception_ptr(
            PeerLostError(str_cat("rank ", rank, ": ", what, " from the group's store failed: ", e.what()),
                          FailureSite{rank, -1, site})));
      } catch (...) {
        promise.set_exception(std::current_exception());  // the message could not be made (out of memory)
      }
    } catch (...) {
      promise.set_exception(std::current_exception());
    }
  }).detach();
  return result;
}

int64_t BatchClaims::wait(std::future<int64_t> call, const std::string& what, const std::string& site) const {
  if (call.wait_for(group_.timeout()) != std::future_status::ready) {
    throw TimeoutError(str_cat("rank ", group_.rank(), ": ", what, " from the group's store took longer than the ",
                               "group's timeout (", format_duration_ms(group_.timeout().count()),
                               "): is the store's host overloaded or gone? (raise --timeout)"),
                       FailureSite{group_.rank(), -1, site});
  }
  return call.get();
}

void BatchClaims::delete_period(int64_t period) {
  const std::string site = str_cat("store delete ", key(period));
  wait(on_own_thread([key = key(period)](c10d::Store& store) { return int64_t{store.deleteKey(key)}; },
                     deleting(period), site),
       deleting(period), site);
}

}  // namespace ringtorch
