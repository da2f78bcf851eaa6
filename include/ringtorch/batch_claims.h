// BatchClaims: the batches of a local-SGD period (local_sgd.h) handed out as the ranks ask for
// them, so that each rank trains as many as its speed allows in the time the period takes,
// whatever its speed does meanwhile (ringtrain's --balance dynamic; docs/training.md, "Local
// SGD"). A split fixed in advance from measured speeds lags a machine whose speed swings: the
// rank that got too much makes the others wait at the outer step.
//
// One counter per period in the group's store (ProcessGroup::store()): a rank claims the next
// batch with one atomic add. Every batch is trained once. A rank much slower than the others
// would hold them up at the outer step if it took one of the last few batches, so a rank stops
// claiming when fewer batches are left than the others train in the time it trains one
// (claims_another(); the speeds are the caller's weights, the same on every rank), except the
// fastest rank, which claims until none is left, and a rank that claimed nothing for
// kMaxPeriodsWithout periods in a row, which asks for one in the next whatever the rule says (its
// speed stays measured; it gets none when the others took them all before it asked).
// Near that point a rank reads the counter before it claims (an add of 0), and waits for both
// round trips to the store; otherwise its next claim travels while it trains the batch before
// (next() starts it), so that it waits for none but a period's first.
//
// Which rank trains which batch depends on timing: unlike a fixed split, a run is not
// reproducible bit for bit (the replicas are still equal after every outer step).
//
// Keys: "shared/claims/<run>/<period>", <run> drawn by rank 0 at construction. Rank 0 deletes
// a period's key two periods later (every rank is then past it: the outer step between needs
// all of them) and the last ones in finish().
//
// Example (given: ringtorch::ProcessGroup& group, ringtorch::LocalSgd& local, int64_t periods, const
// std::function<int64_t(int64_t)>& train_batch):
//   // train_batch(b): an inner step on the period's batch b; returns its samples
//   ringtorch::BatchClaims claims(group);
//   for (int64_t period = 0; period < periods; ++period) {
//     claims.begin_period(/*batches=*/16, std::vector<double>(group.size(), 1.0));
//     while (std::optional<int64_t> batch = claims.next()) local.record_inner_step(train_batch(*batch));
//     local.outer_step();
//   }
//   local.synchronize();
//   claims.finish();
//
// Thread-safety: one thread per rank, which calls all of it; each call on the store runs on a
// detached thread of its own, which owns copies of the store and the key, and next() may leave
// one in flight. Every rank calls begin_period() the same number of times.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include <ringtorch/process_group.h>

namespace c10d {
class Store;
}

namespace ringtorch {

// Whether a rank claims another batch when `left` batches are left and the other ranks train
// `others_per_mine` batches in the time it trains one: when one is left and it is the fastest
// rank, or when at least `others_per_mine` are left (it then finishes before the others run out).
bool claims_another(int64_t left, double others_per_mine, bool fastest);

class BatchClaims {
 public:
  // A collective of `group` (rank 0 draws the run's key and broadcasts it).
  explicit BatchClaims(ProcessGroup& group);
  BatchClaims(const BatchClaims&) = delete;
  BatchClaims& operator=(const BatchClaims&) = delete;

  // A rank that claimed nothing for this many periods in a row asks for a batch in the next
  // whatever the rule says, so that its speed stays measured (a rank far slower than the others
  // would otherwise never claim, and its weight never change). One so slow that the others took
  // every batch before it asked gets none, and asks again in the period after.
  static constexpr int kMaxPeriodsWithout = 3;  // within every 4 periods, the balancer's interval

  // Starts the next period: `batches` batches (>= 0), `weights` the ranks' speeds (one per rank,
  // >= 0, any scale; the fastest claims to the end: the largest weight, the lowest rank among
  // equals). Every rank passes the same. Throws InvalidArgumentError otherwise (locally).
  void begin_period(int64_t batches, const std::vector<double>& weights);
  // The next batch of the period for this rank to train, in [0, batches), or nullopt: the
  // period is over for this rank (it stays over until begin_period()). Store failures throw
  // PeerLostError naming the rank, the period and the store; a store call that takes longer
  // than the group's timeout throws TimeoutError (the call is left to end on its own thread).
  // finish() and begin_period() (rank 0 deletes old counters) throw alike.
  std::optional<int64_t> next();
  // Rank 0 deletes the keys left: call it when every rank is past the last period (after the
  // outer step that followed it has completed: with overlap_steps, after LocalSgd::synchronize()).
  void finish();

  int64_t claimed() const { return claimed_; }  // this period's batches this rank took

 private:
  // Every call on the counters runs on a detached thread of its own, which owns copies of the
  // store and the key, and is waited for no longer than the group's timeout: a store whose host
  // hangs cannot hold a rank past --timeout, nor an error wait for the call.
  std::future<int64_t> add_async(int64_t value);          // on this period's counter
  int64_t wait_for_add(std::future<int64_t> call) const;  // its result (wait())
  std::future<int64_t> on_own_thread(std::function<int64_t(c10d::Store&)> call, std::string what, std::string site);
  // The call's result; throws TimeoutError after the group's timeout, or the call's PeerLostError.
  int64_t wait(std::future<int64_t> call, const std::string& what, const std::string& site) const;
  void delete_period(int64_t period);
  std::string key(int64_t period) const;

  ProcessGroup& group_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::string run_;      // the run's part of every key
  int64_t period_ = -1;  // the current period's number, from 0
  int64_t batches_ = 0;  // in it
  double others_per_mine_ = 1;
  bool fastest_ = false;
  bool over_ = true;
  int64_t expected_left_ = 0;  // batches left when this rank's last claim is trained, as expected
  int64_t claimed_ = 0;
  int periods_without_ = 0;  // periods in a row before this one in which this rank claimed nothing
  // The claim made while the last batch trained (add_async()); next() returns nullopt only
  // without one.
  std::future<int64_t> ahead_;
};

}  // namespace ringtorch
