// ProcessGroup: send and recv. Unlike collectives they do not go through the operation queue:
// a send and a recv may be outstanding in both directions at once (rank 0 sends to 1 while 1
// sends to 0), which a single ordered queue would deadlock. They are posted on the caller's
// thread through Gloo unbound buffers and completed by Work::wait(). A CUDA tensor travels
// through a pinned host copy (device_staging.h): a send copies it in when posted, on the caller's
// stream; a recv copies the received bytes to the device inside wait(), before it returns.
//
// Note [Point-to-point header]
// Gloo aborts the receiving process (an exception on its own thread: std::terminate) when a
// message is longer than the buffer posted for it, and silently completes a receive that gets a
// shorter one. So neither side ever lets Gloo see a size the other did not agree to. Message k
// between two ranks on one tag (k counted per peer and tag, the same way on both sides):
//  - the sender posts a header (magic, k, count, dtype) with the first kPointToPointInlineBytes of data on
//    point_to_point_slot(tag), which the receiver posts kHeaderBytes + kPointToPointInlineBytes for;
//  - the receiver posts its own header as a reply (part 0) and, for a tensor beyond
//    kPointToPointInlineBytes, a receive of the rest (part 1), both on point_to_point_part_slot(tag, k, .);
//  - the sender's wait() reads the reply and sends exactly the bytes the receiver posted for:
//    the rest of its data when the two agree, zeros otherwise (a receive posted in Gloo must not
//    be left pending: the next message on its slot would land in it).
// Both sides compare the two headers, and a mismatch (count or dtype) is a MismatchError on both
// ranks naming both; the group stays usable (the receiving tensor's bytes past the first 64 KiB
// may have been overwritten with the zeros). Everything either side waits for is posted by the
// other when it posts its send or recv, never in its wait(), so sends and receives can be waited
// in any order (two ranks exchanging, each waiting on its send first, is the case to keep).
// Cost: one small reply per message, and a copy of up to 64 KiB into the header.
#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <ringtorch/error.h>
#include <ringtorch/process_group.h>

#include "runtime/comm/failure_report.h"
#include "runtime/comm/gloo_failure.h"
#include "runtime/comm/process_group_impl.h"
#include "runtime/comm/sizes.h"
#include "runtime/comm/tag_space.h"
#include "runtime/comm/tensor_checks.h"

namespace ringtorch {

namespace {

constexpr int64_t kHeaderMagic = 0x7032706865616472;  // "rdaehp2p"
constexpr size_t kHeaderWords = 4;                    // magic, k, count, dtype
constexpr size_t kHeaderBytes = kHeaderWords * sizeof(int64_t);
constexpr uint32_t kReply = 0, kBulk = 1;

struct Header {
  int64_t count = 0;
  int64_t dtype = 0;
  size_t bytes() const { return static_cast<size_t>(count) * c10::elementSize(static_cast<c10::ScalarType>(dtype)); }
  bool operator==(const Header& other) const { return count == other.count && dtype == other.dtype; }
  std::string describe() const { return str_cat(count, " ", dtype_name(static_cast<c10::ScalarType>(dtype))); }
};

void write_header(char* to, uint32_t k, const Header& h) {
  const int64_t words[kHeaderWords] = {kHeaderMagic, static_cast<int64_t>(k), h.count, h.dtype};
  std::memcpy(to, words, kHeaderBytes);
}

Header read_header(const char* from, uint32_t k, const std::string& description, int peer) {
  int64_t words[kHeaderWords];
  std::memcpy(words, from, kHeaderBytes);
  if (words[0] != kHeaderMagic || words[1] != static_cast<int64_t>(k) || words[2] < 0 || words[3] < 0 ||
      words[3] >= static_cast<int64_t>(c10::ScalarType::NumOptions)) {
    throw IoError(str_cat(description, ": rank ", peer,
                          "'s message has no ringtorch point-to-point header (is the peer another program, or "
                          "another ringtorch version?)"));
  }
  return Header{words[2], words[3]};
}

// The part of a tensor of `bytes` that does not ride in its header message.
size_t bulk_of(size_t bytes) { return bytes - std::min(bytes, kPointToPointInlineBytes); }

// Gloo's failure of one wait, as a ringtorch error of this send or recv.
[[noreturn]] void rethrow_wait_failure(const std::exception& e, const std::string& description,
                                       std::chrono::milliseconds timeout, int rank, int peer) {
  std::rethrow_exception(operation_failure(read_gloo_failure(e.what()).kind, description, e.what(), "", timeout,
                                           FailureSite{rank, peer, description}));
}

}  // namespace

uint32_t ProcessGroup::Impl::next_point_to_point_number(bool sending, int peer, uint32_t tag) {
  std::lock_guard<std::mutex> lock(point_to_point_mutex_);
  return (sending ? sends_posted_ : recvs_posted_)[{peer, tag}]++;
}

std::shared_ptr<Work> ProcessGroup::Impl::post_point_to_point(bool sending, const at::Tensor& tensor, int peer,
                                                              uint32_t tag, Timeout call_timeout) {
  const OpType op = sending ? OpType::kSend : OpType::kRecv;
  check_member(op);
  queue_->check_open(op_type_name(op));
  check_tensor(context_prefix(), op, "", tensor);
  check_peer(op, peer);
  auto work = std::make_shared<Work>(
      str_cat(context_prefix(), op_type_name(op), " (group ", name_, ", ", tensor_summary(tensor),
              sending ? " to rank " : " from rank ", peer, ", tag ", tag, ")"),
      std::vector<at::Tensor>{tensor}, call_timeout.value_or(timeout_));
  if (auto broken = queue_->broken()) {
    work->finish(broken);
    return work;
  }
  auto staging = std::make_shared<DeviceStaging>();
  const at::Tensor wire = staging->host(tensor, /*copy_in=*/sending, /*copy_back=*/!sending);
  char* data = static_cast<char*>(wire.data_ptr());
  const Header mine{tensor.numel(), static_cast<int64_t>(tensor.scalar_type())};
  const size_t bytes = wire.nbytes();
  const uint32_t k = next_point_to_point_number(sending, peer, tag);
  // Note [Point-to-point header]. `message`: the sender's header message, or the receiver's
  // room for it; `reply`: the receiver's header, sent back. The waiter keeps both alive.
  const size_t inline_bytes = std::min(bytes, kPointToPointInlineBytes);
  auto message =
      std::make_shared<std::vector<char>>(kHeaderBytes + (sending ? inline_bytes : kPointToPointInlineBytes));
  auto reply = std::make_shared<std::vector<char>>(kHeaderBytes);
  std::shared_ptr<gloo::transport::UnboundBuffer> message_buffer =
      context_->createUnboundBuffer(message->data(), message->size());
  std::shared_ptr<gloo::transport::UnboundBuffer> reply_buffer =
      context_->createUnboundBuffer(reply->data(), reply->size());
  std::shared_ptr<gloo::transport::UnboundBuffer> bulk_buffer;
  if (sending) {
    write_header(message->data(), k, mine);
    if (inline_bytes > 0) std::memcpy(message->data() + kHeaderBytes, data, inline_bytes);
    message_buffer->send(peer, point_to_point_slot(tag));
    reply_buffer->recv(peer, point_to_point_part_slot(tag, k, kReply));
  } else {
    message_buffer->recv(peer, point_to_point_slot(tag));
    write_header(reply->data(), k, mine);
    reply_buffer->send(peer, point_to_point_part_slot(tag, k, kReply));
    if (bulk_of(bytes) > 0) {
      bulk_buffer = context_->createUnboundBuffer(data + kPointToPointInlineBytes, bulk_of(bytes));
      bulk_buffer->recv(peer, point_to_point_part_slot(tag, k, kBulk));
    }
  }
  // The waiter holds the context too: the buffers need its pairs even if the group goes first;
  // and `wire`, which for a CUDA tensor is the host copy the buffers point into.
  work->set_waiter([context = context_, message, reply, message_buffer, reply_buffer, bulk_buffer, wire, staging,
                    sending, rank = rank_, peer, tag, k, mine,
                    description = work->description()](std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char* data = static_cast<char*>(wire.data_ptr());
    Header theirs;
    if (sending) {
      try {
        message_buffer->waitSend(timeout);
        reply_buffer->waitRecv(time_left(deadline));
        theirs = read_header(reply->data(), k, description, peer);
        // Exactly what the receiver posted for: our data when we agree, zeros otherwise.
        const size_t wanted = bulk_of(theirs.bytes());
        if (wanted > 0) {
          std::vector<char> zeros;
          char* from = data + kPointToPointInlineBytes;
          if (!(theirs == mine)) {
            zeros.resize(wanted);
            from = zeros.data();
          }
          auto rest = context->createUnboundBuffer(from, wanted);
          rest->send(peer, point_to_point_part_slot(tag, k, kBulk));
          rest->waitSend(time_left(deadline));
        }
      } catch (const Error&) {
        throw;
      } catch (const std::exception& e) {
        rethrow_wait_failure(e, description, timeout, rank, peer);
      }
    } else {
      try {
        message_buffer->waitRecv(timeout);
        theirs = read_header(message->data(), k, description, peer);
        reply_buffer->waitSend(time_left(deadline));
        if (bulk_buffer) bulk_buffer->waitRecv(time_left(deadline));
      } catch (const Error&) {
        throw;
      } catch (const std::exception& e) {
        rethrow_wait_failure(e, description, timeout, rank, peer);
      }
    }
    if (!(theirs == mine)) {
      const Header& sent = sending ? mine : theirs;
      const Header& received = sending ? theirs : mine;
      std::rethrow_exception(make_error(
          ErrorKind::kMismatch,
          str_cat(description, ": ", sending ? "this rank sent " : str_cat("rank ", peer, " sent "), sent.describe(),
                  " on tag ", tag, ", ", sending ? str_cat("rank ", peer, " receives ") : "this rank receives ",
                  received.describe(), "; a send and its recv must have the same number of elements and dtype"),
          FailureSite{rank, peer, description}));
    }
    if (!sending) {
      const size_t inline_bytes = std::min(wire.nbytes(), kPointToPointInlineBytes);
      if (inline_bytes > 0) std::memcpy(data, message->data() + kHeaderBytes, inline_bytes);  // never from null
      staging->copy_back();  // a CUDA recv: the received bytes go to the device
    }
  });
  return work;
}

std::shared_ptr<Work> ProcessGroup::Impl::send_async(at::Tensor tensor, int dst, uint32_t tag, Timeout call_timeout) {
  return post_point_to_point(true, tensor, dst, tag, call_timeout);
}

std::shared_ptr<Work> ProcessGroup::Impl::recv_async(at::Tensor tensor, int src, uint32_t tag, Timeout call_timeout) {
  return post_point_to_point(false, tensor, src, tag, call_timeout);
}

}  // namespace ringtorch
