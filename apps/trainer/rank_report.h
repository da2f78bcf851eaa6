// The straggler report: where each rank's time went in an epoch (compute, waiting for the
// gradients' all-reduce, samples/s), gathered to rank 0 and printed as one short table, so that
// a slow rank is seen at once. The same numbers go into the metrics file and the final JSON.
//
// "Compute" is a step's time without its waits: the wait for the last buckets after backward
// (DdpIterationStats: last_gradient..finished) and, with --balance (DDP's uneven inputs), the
// step's agreement.
// A rank that waits much is waiting for a slower one (or for the network).
//
// Thread-safety: value types and functions; gather_rank_times is a collective (every rank).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringtorch {

class ProcessGroup;

struct RankTimes {
  double compute_seconds = 0;
  double wait_seconds = 0;
  double loop_seconds = 0;  // the epoch's training loop, wall clock
  int64_t samples = 0;
  int64_t steps = 0;  // optimizer steps (with --local-steps: inner steps, which differ between ranks)
  double samples_per_second() const { return loop_seconds > 0 ? samples / loop_seconds : 0; }
  RankTimes& operator+=(const RankTimes& other);
};

// Every rank's times, in rank order (an allgather).
std::vector<RankTimes> gather_rank_times(ProcessGroup& group, const RankTimes& mine);

// The table rank 0 prints after each epoch, lines prefixed "[ringtorch] ":
//   [ringtorch] epoch 1, per rank:  rank   samples  steps  samples/s  compute s  comm wait s
//   [ringtorch]                        0      4000     63     9019.6       0.41         0.03
//   [ringtorch]                        1      4000     63     8948.0       0.42         0.03
//   [ringtorch] slowest: rank 1 (0.10 ms of compute per sample, 1.02x the fastest, rank 0); the others waited up to
//   0.03 s
std::string format_rank_table(const std::string& title, const std::vector<RankTimes>& ranks);

// [{"rank":0,"samples":..,"steps":..,"samples_per_s":..,"compute_s":..,"comm_wait_s":..}, ...] as JSON text.
std::string rank_times_json(const std::vector<RankTimes>& ranks);

}  // namespace ringtorch
