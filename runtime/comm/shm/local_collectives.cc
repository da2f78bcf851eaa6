#include "runtime/comm/shm/local_collectives.h"

#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <new>
#include <thread>
#include <utility>

#include <ringtorch/error.h>

namespace ringtorch {
namespace {

constexpr uint64_t kMagic = 0x72696e67746f7263ULL;  // "ringtorc"
// Spinning costs a core but answers in well under a microsecond; after this many rounds the
// waiter sleeps on the futex instead.
constexpr int kSpinRounds = 4000;
constexpr std::chrono::milliseconds kSleepStep(10);
constexpr std::chrono::milliseconds kLivenessInterval(100);

struct alignas(64) RankState {
  std::atomic<uint32_t> arrived;  // barriers this rank has arrived at
  std::atomic<uint32_t> asleep;   // 1 while inside a futex wait: its all-reduce blocks are up for grabs
  int32_t pid;
  // The calls this rank made on the segment, by the parity of their number ([0]: the number,
  // then the signature's words), each written before arriving at the call's first barrier. Two
  // copies, because a one-barrier call (barrier()) lets this rank publish its next call while a
  // peer still compares this one: that peer reads the other copy.
  int64_t calls[2][1 + CallSignature::kWords];
  // Block r of each all-reduce piece without a cross-host step: the last piece whose block r
  // some rank claimed, as piece number * kRanksPerClaim + the claiming local rank (one word,
  // so that the claimer is known with the claim), and the last piece whose block r is reduced.
  std::atomic<uint64_t> block_claimed;
  std::atomic<uint64_t> block_done;
};
constexpr uint64_t kRanksPerClaim = 1 << 16;  // more local ranks than any host has

struct alignas(64) Header {
  std::atomic<uint64_t> magic;  // written last (release): a reader that sees it sees the rest
  uint64_t nonce;
  uint64_t area_bytes;
  uint32_t local_size;
  alignas(64) std::atomic<uint32_t> bell;  // bumped by every arrival: what sleepers wait on
  std::atomic<uint32_t> sleepers;          // ranks inside a futex wait (wake only when > 0)
};

static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be plain 32-bit atomics");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the block words are shared between processes");

size_t data_offset(int local_size) {
  const size_t end = sizeof(Header) + sizeof(RankState) * static_cast<size_t>(local_size);
  return (end + 4095) / 4096 * 4096;
}

Header* header(void* base) { return static_cast<Header*>(base); }
RankState* rank_state(void* base, int r) {
  return reinterpret_cast<RankState*>(static_cast<uint8_t*>(base) + sizeof(Header)) + r;
}

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// A pid that no longer runs (or is a zombie nobody has reaped yet).
bool process_gone(int pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;  // no /proc (or another pid namespace): trust kill
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && (line[paren + 2] == 'Z' || line[paren + 2] == 'X');
}

// memcpy that accepts the null pointer of an empty tensor when there is nothing to copy
// (memcpy itself must never see null, even for 0 bytes: UBSan caught it).
inline void copy_bytes(void* to, const void* from, size_t bytes) {
  if (bytes > 0) std::memcpy(to, from, bytes);
}

bool reached(uint32_t arrived, uint32_t target) { return static_cast<int32_t>(arrived - target) >= 0; }

}  // namespace

size_t LocalCollectives::segment_bytes(int local_size, size_t area_bytes) {
  return data_offset(local_size) + area_bytes * (static_cast<size_t>(local_size) + 2);
}

void LocalCollectives::initialise(void* segment, int local_size, size_t area_bytes, uint64_t nonce) {
  Header* h = new (segment) Header();
  h->area_bytes = area_bytes;
  h->local_size = static_cast<uint32_t>(local_size);
  h->bell.store(0);
  h->sleepers.store(0);
  for (int r = 0; r < local_size; ++r) {
    RankState* s = new (rank_state(segment, r)) RankState();
    s->arrived.store(0);
    s->asleep.store(0);
    s->pid = 0;
    s->block_claimed.store(0);
    s->block_done.store(0);
  }
  h->nonce = nonce;
  h->magic.store(kMagic, std::memory_order_release);
}

LocalCollectives::LocalCollectives(SharedSegment segment, int local_rank, std::vector<int> global_ranks,
                                   size_t area_bytes, uint64_t nonce)
    : segment_(std::move(segment)),
      local_rank_(local_rank),
      global_ranks_(std::move(global_ranks)),
      area_bytes_(area_bytes) {
  Header* h = header(segment_.data());
  if (h->magic.load(std::memory_order_acquire) != kMagic || h->nonce != nonce ||
      h->local_size != global_ranks_.size() || h->area_bytes != area_bytes) {
    throw IoError(str_cat("shared memory ", segment_.name(), " is not the one this group's first local rank created"));
  }
  rank_state(segment_.data(), local_rank_)->pid = static_cast<int32_t>(::getpid());
}

uint8_t* LocalCollectives::area(int r) const {
  return static_cast<uint8_t*>(segment_.data()) + data_offset(local_size()) + area_bytes_ * static_cast<size_t>(r);
}

uint8_t* LocalCollectives::result_area(uint64_t parity) const {
  return area(local_size() + static_cast<int>(parity & 1));
}

void LocalCollectives::meet(Deadline deadline, const CallSignature* call) {
  void* base = segment_.data();
  RankState* me = rank_state(base, local_rank_);
  if (call) {
    ++calls_;
    int64_t* published = me->calls[calls_ & 1];
    published[0] = static_cast<int64_t>(calls_);
    const CallSignature::Words words = call->encode();
    std::copy(words.begin(), words.end(), published + 1);
  }
  const uint32_t target = ++barriers_;
  me->arrived.store(target);  // seq_cst: the area's data and `call` are visible to whoever sees it
  ring_bell();

  const int n = local_size();
  wait_until(
      [&] {
        for (int r = 0; r < n; ++r) {
          if (!reached(rank_state(base, r)->arrived.load(), target)) return false;
        }
        return true;
      },
      deadline, [&](int r) { return !reached(rank_state(base, r)->arrived.load(), target); }, "arriving");
  if (call) check_calls_agree(*call);
}

template <typename Done, typename WaitedFor>
void LocalCollectives::wait_until(const Done& done, Deadline deadline, const WaitedFor& waited_for, const char* what) {
  for (int i = 0; i < kSpinRounds; ++i) {
    if (done()) return;
    cpu_relax();
  }
  Header* h = header(segment_.data());
  std::atomic<uint32_t>& asleep = rank_state(segment_.data(), local_rank_)->asleep;
  auto last_liveness_check = std::chrono::steady_clock::now();
  while (true) {
    h->sleepers.fetch_add(1);
    asleep.store(1);
    const uint32_t bell = h->bell.load();
    if (done()) {
      asleep.store(0);
      h->sleepers.fetch_sub(1);
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      asleep.store(0);
      h->sleepers.fetch_sub(1);
      fail_waiting(waited_for, what, /*timed_out=*/true, timeout_);
    }
    const auto block = std::min<std::chrono::nanoseconds>(kSleepStep, deadline - now);
    timespec ts{static_cast<time_t>(block.count() / 1000000000), static_cast<long>(block.count() % 1000000000)};
    futex(&h->bell, FUTEX_WAIT, bell, &ts);
    asleep.store(0);
    h->sleepers.fetch_sub(1);
    if (done()) return;
    if (std::chrono::steady_clock::now() - last_liveness_check >= kLivenessInterval) {
      last_liveness_check = std::chrono::steady_clock::now();
      for (int r = 0; r < local_size(); ++r) {
        if (waited_for(r) && process_gone(rank_state(segment_.data(), r)->pid)) {
          fail_waiting(waited_for, what, /*timed_out=*/false, timeout_);
        }
      }
    }
  }
}

void LocalCollectives::ring_bell() {
  Header* h = header(segment_.data());
  h->bell.fetch_add(1);
  if (h->sleepers.load() > 0) futex(&h->bell, FUTEX_WAKE, INT_MAX, nullptr);
}

void LocalCollectives::check_calls_agree(const CallSignature& mine) {
  std::string differing;
  int first_differing = -1;
  for (int r = 0; r < local_size(); ++r) {
    const int64_t* published = rank_state(segment_.data(), r)->calls[calls_ & 1];
    const CallSignature theirs = CallSignature::decode(published + 1);
    if (theirs != mine || published[0] != static_cast<int64_t>(calls_)) {
      differing += str_cat("; rank ", global_ranks_[r], " called ", theirs.describe(), " (call #", published[0], ")");
      if (first_differing < 0) first_differing = global_ranks_[r];
    }
  }
  if (!differing.empty()) {
    throw MismatchError(str_cat("shared memory: this rank called ", mine.describe(), " (call #", calls_,
                                " on this host's segment)", differing,
                                "; every rank must call the same collectives, in the same order, with the same sizes "
                                "and dtypes"),
                        FailureSite{global_ranks_[local_rank_], first_differing, ""});
  }
}

void LocalCollectives::fail_waiting(const std::function<bool(int)>& waited_for, const char* what, bool timed_out,
                                    std::chrono::milliseconds timeout) {
  std::string missing;
  int blamed = -1, count = 0;
  for (int r = 0; r < local_size(); ++r) {
    if (!waited_for(r)) continue;
    const RankState* s = rank_state(segment_.data(), r);
    const bool gone = process_gone(s->pid);
    if (timed_out || gone) {
      missing += str_cat(missing.empty() ? "" : ", ", "peer rank ", global_ranks_[r], " (pid ", s->pid,
                         gone ? ", exited" : str_cat(", alive but not ", what), ")");
      blamed = global_ranks_[r];
      ++count;
    }
  }
  const FailureSite site{global_ranks_[local_rank_], count == 1 ? blamed : -1, ""};
  if (timed_out) {
    throw TimeoutError(str_cat("shared memory (same host): timed out after ", format_duration_ms(timeout.count()),
                               " waiting for ", missing),
                       site);
  }
  throw PeerLostError(str_cat("shared memory (same host): ", missing, " while this rank waited for it"), site);
}

void LocalCollectives::barrier(std::chrono::milliseconds timeout) {
  timeout_ = timeout;
  const CallSignature call;  // a barrier, published like any call: a peer in another call names it
  meet(std::chrono::steady_clock::now() + timeout, &call);
}

void LocalCollectives::allreduce(void* data, size_t count, size_t element_size, const ReduceFunction& reduce,
                                 const CallSignature& call, std::chrono::milliseconds timeout,
                                 const std::function<void(void*, size_t)>& cross_host) {
  timeout_ = timeout;
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  const int n = local_size();
  const size_t piece_elements = area_bytes_ / element_size;
  auto* bytes = static_cast<uint8_t*>(data);
  bool first = true;
  for (size_t done = 0; done < count || first; done += piece_elements) {
    const size_t elements = std::min(piece_elements, count - done);
    const size_t length = elements * element_size;
    uint8_t* mine = bytes + done * element_size;
    copy_bytes(area(local_rank_), mine, length);
    meet(deadline, first ? &call : nullptr);
    first = false;
    uint8_t* result = result_area(pieces_);
    const uint64_t piece = ++pieces_;  // the same number on every rank
    // Block s of the piece: elements [begin, end).
    auto block_bounds = [&](int s) { return std::make_pair(elements * s / n, elements * (s + 1) / n); };
    // Block s, reduced over the areas in local-rank order (whoever reduces it).
    auto reduce_block = [&](int s) {
      const auto [begin, end] = block_bounds(s);
      const size_t offset = begin * element_size;
      if (end == begin) return;
      if (n == 1) {
        copy_bytes(result + offset, area(0) + offset, (end - begin) * element_size);
      } else {
        reduce(result + offset, area(0) + offset, area(1) + offset, end - begin);
        for (int r = 2; r < n; ++r) reduce(result + offset, result + offset, area(r) + offset, end - begin);
      }
    };
    if (cross_host) {
      // Block r crosses hosts in local rank r's own subgroup: only rank r can take it.
      reduce_block(local_rank_);
      const auto [begin, end] = block_bounds(local_rank_);
      cross_host(result + begin * element_size, end - begin);
      meet(deadline);
    } else {
      reduce_claimed_blocks(piece, reduce_block, deadline);
    }
    copy_bytes(mine, result, length);
    if (count == 0) break;
  }
}

bool LocalCollectives::claim_block(int s, uint64_t piece) {
  std::atomic<uint64_t>& claimed = rank_state(segment_.data(), s)->block_claimed;
  uint64_t seen = claimed.load();
  while (seen / kRanksPerClaim < piece) {
    if (claimed.compare_exchange_weak(seen, piece * kRanksPerClaim + static_cast<uint64_t>(local_rank_))) return true;
  }
  return false;
}

template <typename ReduceBlock>
void LocalCollectives::reduce_claimed_blocks(uint64_t piece, const ReduceBlock& reduce_block, Deadline deadline) {
  const int n = local_size();
  void* base = segment_.data();
  for (int i = 0; i < n; ++i) {
    const int s = (local_rank_ + i) % n;  // its own first, then those of ranks asleep
    if (s != local_rank_ && rank_state(base, s)->asleep.load() == 0) continue;
    if (!claim_block(s, piece)) continue;
    reduce_block(s);
    rank_state(base, s)->block_done.store(piece);  // seq_cst: the result is visible to whoever sees it
    ring_bell();
  }
  auto block_pending = [&](int s) { return rank_state(base, s)->block_done.load() < piece; };
  wait_until(
      [&] {
        for (int s = 0; s < n; ++s) {
          if (block_pending(s)) return false;
        }
        return true;
      },
      deadline,
      [&](int r) {
        for (int s = 0; s < n; ++s) {
          if (!block_pending(s)) continue;
          // Claimed for this piece: the claimer owes it. Not yet: its owner, who always
          // claims its own block (a rank that died or timed out before that never will).
          const uint64_t claimed = rank_state(base, s)->block_claimed.load();
          const uint64_t owes = claimed / kRanksPerClaim >= piece ? claimed % kRanksPerClaim : static_cast<uint64_t>(s);
          if (owes == static_cast<uint64_t>(r)) return true;
        }
        return false;
      },
      "done with its part of the reduction");
}

void LocalCollectives::broadcast(void* data, size_t bytes, int root, const CallSignature& call,
                                 std::chrono::milliseconds timeout) {
  timeout_ = timeout;
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  auto* p = static_cast<uint8_t*>(data);
  bool first = true;
  for (size_t done = 0; done < bytes || first; done += area_bytes_) {
    const size_t length = std::min(area_bytes_, bytes - done);
    if (local_rank_ == root) copy_bytes(area(root), p + done, length);
    meet(deadline, first ? &call : nullptr);
    first = false;
    if (local_rank_ != root) copy_bytes(p + done, area(root), length);
    meet(deadline);  // the root may refill its area only after everyone has copied
    if (bytes == 0) break;
  }
}

void LocalCollectives::allgather(const void* input, void* output, size_t bytes, const CallSignature& call,
                                 std::chrono::milliseconds timeout) {
  timeout_ = timeout;
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  bool first = true;
  for (size_t done = 0; done < bytes || first; done += area_bytes_) {
    const size_t length = std::min(area_bytes_, bytes - done);
    copy_bytes(area(local_rank_), in + done, length);
    meet(deadline, first ? &call : nullptr);
    first = false;
    for (int r = 0; r < local_size(); ++r) copy_bytes(out + bytes * r + done, area(r), length);
    meet(deadline);
    if (bytes == 0) break;
  }
}

void LocalCollectives::reduce_scatter(const void* input, void* output, size_t count, size_t element_size,
                                      const ReduceFunction& reduce, const CallSignature& call,
                                      std::chrono::milliseconds timeout) {
  timeout_ = timeout;
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  const int n = local_size();
  // Each area carries, per piece, `elements` of every block: n * elements must fit.
  const size_t piece_elements = std::max<size_t>(1, area_bytes_ / element_size / n);
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  const size_t block_bytes = count * element_size;
  bool first = true;
  for (size_t done = 0; done < count || first; done += piece_elements) {
    const size_t elements = std::min(piece_elements, count - done);
    const size_t length = elements * element_size;
    for (int b = 0; b < n; ++b)
      copy_bytes(area(local_rank_) + b * length, in + b * block_bytes + done * element_size, length);
    meet(deadline, first ? &call : nullptr);
    first = false;
    if (elements > 0) {
      uint8_t* target = out + done * element_size;
      const size_t mine = static_cast<size_t>(local_rank_) * length;
      if (n == 1) {
        copy_bytes(target, area(0) + mine, length);
      } else {
        reduce(target, area(0) + mine, area(1) + mine, elements);
        for (int r = 2; r < n; ++r) reduce(target, target, area(r) + mine, elements);
      }
    }
    meet(deadline);
    if (count == 0) break;
  }
}

}  // namespace ringtorch
