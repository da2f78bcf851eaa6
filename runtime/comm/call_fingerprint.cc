#include "runtime/comm/call_fingerprint.h"

#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include <ringtorch/error.h>

#include "runtime/comm/allreduce_algorithm.h"
#include "runtime/comm/gloo_failure.h"
#include "runtime/comm/sync_lane.h"
#include "runtime/comm/tag_space.h"

namespace ringtorch {
namespace {

// The header every fingerprint message starts with, as int64 words.
constexpr int64_t kMagic = 0x5254465031;  // "RTFP" and format 1
constexpr int kSequenceWord = 1, kCallWord = 2, kAlgorithmWord = kCallWord + CallSignature::kWords,
              kInlineBytesWord = kAlgorithmWord + 1, kHeaderWords = kInlineBytesWord + 1;
constexpr size_t kHeaderBytes = kHeaderWords * sizeof(int64_t);
static_assert(kHeaderBytes <= kFingerprintHeaderBytes, "sizes.h reserves the header's room");
constexpr size_t kMessageCapacity = kHeaderBytes + kFingerprintInlineBytes;

using Header = std::array<int64_t, kHeaderWords>;

Header encode(const CallFingerprint& fingerprint, size_t inline_bytes) {
  Header header{};
  header[0] = kMagic;
  header[kSequenceWord] = fingerprint.sequence;
  const CallSignature::Words call = fingerprint.call.encode();
  std::copy(call.begin(), call.end(), header.begin() + kCallWord);
  header[kAlgorithmWord] = fingerprint.algorithm;
  header[kInlineBytesWord] = static_cast<int64_t>(inline_bytes);
  return header;
}

CallFingerprint decode(const Header& header) {
  CallFingerprint fingerprint;
  fingerprint.sequence = static_cast<uint32_t>(header[kSequenceWord]);
  fingerprint.call = CallSignature::decode(header.data() + kCallWord);
  fingerprint.algorithm = static_cast<int>(header[kAlgorithmWord]);
  return fingerprint;
}

// Gloo allows destroying an unbound buffer whose receive is still posted: its destructor waits
// until the device thread lets go of it (gloo::ShareableNonOwningPtr). TSan cannot see that
// wait (it happens inside uninstrumented libgloo): tests/tsan_suppressions.txt names this
// function and Gloo's destructor for that reason alone.
__attribute__((noinline)) void drop_posted_receives(
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>>& receives) {
  receives.clear();
}

}  // namespace

std::string CallFingerprint::describe() const {
  std::string text = str_cat(call.describe(), " (operation #", sequence);
  if (algorithm >= 0) text += str_cat(", ", allreduce_algorithm_name(static_cast<AllreduceAlgorithm>(algorithm)));
  return text + ")";
}

FingerprintExchange::FingerprintExchange() : uses_lane_(false) {}
FingerprintExchange::FingerprintExchange(std::unique_ptr<SyncLane> lane)
    : lane_(std::move(lane)), uses_lane_(lane_ != nullptr) {}
FingerprintExchange::~FingerprintExchange() = default;

// Note [Reused fingerprint buffers]: the unbound buffers are made once per context and every
// later exchange posts on them again (a buffer's earlier receive or send has completed by
// then). Making and destroying them per exchange put a tail of milliseconds on a share of a
// training run's small all-reduces (docs/benchmarks.md, "The tail of small all-reduces"):
// destroying an unbound buffer waits until Gloo's event-loop thread has let go of it.
void FingerprintExchange::post_receives(gloo::Context& context, int set) {
  const int rank = context.rank, size = context.size;
  if (posted_[set].size() != static_cast<size_t>(size)) {
    receive_[set].get(kMessageCapacity * static_cast<size_t>(size - 1));
    posted_[set].resize(static_cast<size_t>(size));
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank) posted_[set][peer] = context.createUnboundBuffer(block(set, peer), kMessageCapacity);
    }
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank) posted_[set][peer]->recv(peer, fingerprint_slot());
  }
}

void FingerprintExchange::release() {
  for (auto& set : posted_) drop_posted_receives(set);
  outbound_.reset();
  posted_for_ = nullptr;
  lane_.reset();
}

void FingerprintExchange::exchange(gloo::Context& context, const CallFingerprint& mine, const void* inline_data,
                                   size_t inline_bytes, std::chrono::steady_clock::time_point deadline) {
  rank_ = context.rank;
  const int rank = context.rank, size = context.size;
  if (inline_bytes > kFingerprintInlineBytes) {
    throw InvalidArgumentError(
        str_cat("call fingerprint: ", inline_bytes, " inline bytes (at most ", kFingerprintInlineBytes, ")"));
  }
  if (uses_lane_ && !lane_) {
    throw InvalidArgumentError("call fingerprint: the group's synchronous lane was closed (the group was shut down)");
  }
  // The same memory as the outbound buffers', never regrown.
  char* message = lane_ ? lane_->outgoing() : send_.get(kMessageCapacity);
  const Header header = encode(mine, inline_bytes);
  std::memcpy(message, header.data(), kHeaderBytes);
  if (inline_bytes > 0) std::memcpy(message + kHeaderBytes, inline_data, inline_bytes);
  if (lane_) {
    lane_->exchange(kHeaderBytes + inline_bytes, deadline,
                    [](int peer) { return str_cat("peer rank ", peer, "'s call"); });
  } else {
    send_on_context(context, kHeaderBytes + inline_bytes);
  }
  std::string differing;
  int first_differing = -1;
  bool only_algorithms_differ = true;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const char* message_in = nullptr;
    if (lane_) {
      message_in = lane_->incoming(peer);  // every peer's has arrived
    } else {
      wait_for_receive(*posted_[1 - current_][peer], rank, peer, deadline, str_cat("peer rank ", peer, "'s call"));
      message_in = message_from(peer);
    }
    Header theirs_header;
    std::memcpy(theirs_header.data(), message_in, kHeaderBytes);
    const CallFingerprint theirs = decode(theirs_header);
    const bool same_call = theirs_header[0] == kMagic && theirs.sequence == mine.sequence && theirs.call == mine.call;
    if (same_call && theirs.algorithm == mine.algorithm) continue;
    only_algorithms_differ = only_algorithms_differ && same_call;
    differing += theirs_header[0] != kMagic
                     ? str_cat("; rank ", peer, " sent something that is not a ringtorch call fingerprint")
                     : str_cat("; rank ", peer, " called ", theirs.describe());
    if (first_differing < 0) first_differing = peer;
  }
  // Sends complete once every peer has received; a peer that has not is reported above. (On
  // the lane, every write completed in SyncLane::exchange.)
  if (!lane_) {
    for (int sent = 0; sent < size - 1; ++sent) outbound_->waitSend(time_left(deadline));
  }
  if (!differing.empty()) {
    throw MismatchError(
        str_cat("ranks disagree: this rank called ", mine.describe(), differing,
                only_algorithms_differ
                    ? "; the ranks chose different all-reduce algorithms: set RINGTORCH_ALLREDUCE_ALGORITHM "
                      "(or ProcessGroupOptions::allreduce_algorithm) alike on every rank"
                    : "; every rank must call the same collectives, in the same order, with the same sizes and "
                      "dtypes"),
        FailureSite{rank, first_differing, ""});
  }
}

void FingerprintExchange::send_on_context(gloo::Context& context, size_t bytes) {
  // Note [Pre-posted fingerprint receives]: this operation's receives were posted at the end of
  // the previous exchange (or now, at the first), and the next operation's are posted before
  // this one waits: a peer that sends finds our receive already posted and writes at once,
  // instead of waiting for Gloo's "recv ready" notification (one one-way message less per
  // collective). Two sets alternate, so the next operation's message cannot land where this
  // one's inline data is still being read. Gloo hands one pair's messages on one slot to its
  // receives in the order they were posted.
  if (posted_for_ != &context) {
    release();
    posted_for_ = &context;
    current_ = 0;
    post_receives(context, current_);
    outbound_ = context.createUnboundBuffer(send_.get(kMessageCapacity), kMessageCapacity);
  }
  post_receives(context, 1 - current_);
  current_ = 1 - current_;  // the set this exchange receives into is now 1 - current_
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer != context.rank) outbound_->send(peer, fingerprint_slot(), 0, bytes);
  }
}

char* FingerprintExchange::block(int set, int peer) {
  // Peer p's message lands in block p, or p - 1 past this rank; each block has the full capacity.
  return receive_[set].get(0) + kMessageCapacity * static_cast<size_t>(peer < rank_ ? peer : peer - 1);
}

// The last exchange received into the set before current_ (exchange() flips it first).
char* FingerprintExchange::message_from(int peer) { return block(1 - current_, peer); }

char* FingerprintExchange::inline_data_of(int peer) {
  return (lane_ ? lane_->incoming(peer) : message_from(peer)) + kHeaderBytes;
}

}  // namespace ringtorch
