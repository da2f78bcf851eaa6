// Every size threshold of the communication engine, in one table. The mechanisms (the
// algorithms, the shared-memory path, the fingerprint, the lane) take their sizes from here and
// decide none of their own; choose_allreduce_algorithm() (allreduce_algorithm.h) is the one
// policy that picks an algorithm by size. Where and how each value was measured:
// docs/process_group.md, "Sizes".
//
// One word for the unit a message is cut into: a *piece* (pieces run one after another, or are
// pipelined). A *block* is a rank's fixed share of a buffer; an *area* is a rank's part of a
// shared-memory segment.
#pragma once

#include <cstddef>

namespace ringtorch {

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;

// Data of all-reduce, broadcast and allgather up to this size travels inside the call
// fingerprint (Note [Call fingerprint]): the check costs no extra round trip.
constexpr size_t kFingerprintInlineBytes = 256 * KiB;
// A call fingerprint's header, and the largest message of the synchronous lane (sync_lane.h):
// a header and its inline data.
constexpr size_t kFingerprintHeaderBytes = 128;
constexpr size_t kSyncLaneMessageBytes = kFingerprintHeaderBytes + kFingerprintInlineBytes;
// send/recv: data up to this size travels inside the header (Note [Point-to-point header]).
constexpr size_t kPointToPointInlineBytes = 64 * KiB;

// All-reduce algorithm by size (choose_allreduce_algorithm): at 2 ranks the direct exchange
// below kDirectMaxBytesTwoRanks and Gloo's ring from there; at more ranks direct while (n - 1)
// x the message is at most kDirectMaxFanoutBytes, the ring above.
constexpr size_t kDirectMaxBytesTwoRanks = 8 * MiB;
constexpr size_t kDirectMaxFanoutBytes = 1 * MiB;
// Between 2 ranks the direct exchange cuts buffers of at least twice this into pieces of it,
// each reduced while the next are in flight.
constexpr size_t kDirectPieceBytes = 1 * MiB;

// When any rank of a group sees a CUDA device, every rank cuts all-reduce into pieces of this
// size (piece_plan.h), so that a GPU rank overlaps the copies of one piece with the reduction of
// another; CPU-only groups keep whole buffers.
constexpr size_t kAllreducePieceBytes = 16 * MiB;

// Each rank's area of a shared-memory segment (shm/local_collectives.h): a same-host
// collective runs in pieces of at most this size.
constexpr size_t kSharedMemoryAreaBytes = 4 * MiB;

}  // namespace ringtorch
