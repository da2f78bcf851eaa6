// ProcessGroup: send and recv. Unlike collectives they do not go through the operation queue:
// a send and a recv may be outstanding in both directions at once (rank 0 sends to 1 while 1
// sends to 0), which a single ordered queue would deadlock. They are posted on the caller's
// thread through Gloo unbound buffers and completed by Work::wait(). A CUDA tensor travels
// through a pinned host copy (device_staging.h): a send copies it in when posted, on the caller's
// stream; a recv copies the received bytes to the device inside wait(), before it returns.
#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>

#include "base/error.h"
#include "runtime/comm/failure_report.h"
#include "runtime/comm/gloo_failure.h"
#include "runtime/comm/process_group.h"
#include "runtime/comm/tag_space.h"
#include "runtime/comm/tensor_checks.h"

namespace ringtorch {

std::shared_ptr<Work> ProcessGroup::post_point_to_point(bool sending, const at::Tensor& tensor, int peer, uint32_t tag,
                                                        Timeout call_timeout) {
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
  std::shared_ptr<gloo::transport::UnboundBuffer> buffer =
      context_->createUnboundBuffer(wire.data_ptr(), wire.nbytes());
  if (sending) {
    buffer->send(peer, point_to_point_slot(tag));
  } else {
    buffer->recv(peer, point_to_point_slot(tag));
  }
  // The waiter holds the context too: the buffer needs its pairs even if the group goes first;
  // and `wire`, which for a CUDA send is the host copy the buffer points into.
  work->set_waiter([context = context_, buffer, wire, staging, sending, rank = rank_, peer,
                    description = work->description()](std::chrono::milliseconds timeout) {
    try {
      if (sending) {
        buffer->waitSend(timeout);
      } else {
        buffer->waitRecv(timeout);
      }
    } catch (const std::exception& e) {
      std::rethrow_exception(operation_failure(read_gloo_failure(e.what()).kind, description, e.what(), "", timeout,
                                               FailureSite{rank, peer, description}));
    }
    staging->copy_back();  // a CUDA recv: the received bytes go to the device
  });
  return work;
}

std::shared_ptr<Work> ProcessGroup::send_async(at::Tensor tensor, int dst, uint32_t tag, Timeout call_timeout) {
  return post_point_to_point(true, tensor, dst, tag, call_timeout);
}

std::shared_ptr<Work> ProcessGroup::recv_async(at::Tensor tensor, int src, uint32_t tag, Timeout call_timeout) {
  return post_point_to_point(false, tensor, src, tag, call_timeout);
}

}  // namespace ringtorch
