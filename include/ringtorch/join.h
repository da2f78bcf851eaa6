// Group membership over a store: join rounds and barriers.
//
// Note [Join rounds]
// A run id may be reused: a second job against the same Redis or the same file, or a restarted
// group under the same launcher, finds the keys of the earlier one still there. Every member
// therefore joins through a counter: the k-th complete set of `group_size` joins under one scope
// is round k, and the round number becomes part of the key prefix, so a new round never reads
// the previous round's keys. A member that joins a round twice (two processes with one rank, or
// an earlier run that crashed half-way through joining) gets an error saying so; the others
// time out naming the members that are missing. ringrun adds its restart count to the scope, so
// a half-joined generation never poisons the next one.
#pragma once

#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace ringtorch {

struct MemberContext {
  int member = 0;  // this member's index in [0, group_size)
  int group_size = 1;
  std::string noun = "rank";  // "rank" or "node", for messages
  std::string operation;      // e.g. "rendezvous via tcp://10.0.0.1:29500", for messages
};

// "[rank 1/4] "
std::string member_prefix(const MemberContext& who);

// Joins the next round under `scope` (a store already prefixed for the run). Returns the round.
int join_round(c10d::Store& scope, const MemberContext& who, std::chrono::milliseconds timeout);

// Waits until every member has reached barrier `name` (keys "barrier/<name>/<member>").
void store_barrier(c10d::Store& store, const std::string& name, const MemberContext& who,
                   std::chrono::milliseconds timeout);

// The last barrier before members stop using the store. A plain barrier is not enough when one
// member hosts the store (rank 0's TCPStore): it could pass and exit while the others are still
// polling for the barrier's keys. Here every member also says it has left, and member 0 waits
// for all of them before returning.
void leave_barrier(c10d::Store& store, const std::string& name, const MemberContext& who,
                   std::chrono::milliseconds timeout);

}  // namespace ringtorch
