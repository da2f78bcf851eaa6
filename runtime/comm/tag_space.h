// Note [Tag space]
//
// One Gloo context carries everything a group sends, and Gloo matches a message to its
// receiver by a 64-bit *slot*. Two messages that may be in flight at the same time must never
// share a slot. This header owns every tag and slot ringtorch uses; nothing else may invent one.
//
// 32-bit tags, passed to Gloo's collectives (which build the slot as their own 8-bit prefix in
// bits 56-63, then the tag) and to ringtorch's direct all-reduce:
//
//   0x00000000 .. 0x7FFFFFFF   operation_tag(sequence): the group's operations, numbered in
//                              submission order on every rank (wraps after 2^31 operations;
//                              harmless, since operations run one at a time)
//   0xFFFFFF00                 kCreationTag: the collectives group creation runs (whether any
//                              rank sees a GPU or declines the synchronous lane) before
//                              operation 0 exists
//
// 64-bit slots of ringtorch's own unbound-buffer traffic, in bits Gloo's prefixes never use:
//
//   bit 40 | user tag          point_to_point_slot(tag): send/recv (outside the operation order,
//                              so their slots must be apart from every operation's)
//   bit 41 | tag               direct_allreduce_slot(tag): the direct all-reduce of the operation
//                              with that tag
//   bit 43 | part << 44        point_to_point_part_slot(tag, k, part): the receiver's reply
//     | k mod 2^10 << 45       (part 0) and the bulk data (part 1) of the k-th message between
//     | user tag               two ranks on one user tag (Note [Point-to-point header]); k
//                              counts that pair's messages on that tag, the same way on both sides
//   bit 42                     fingerprint_slot(): every operation's call fingerprint
//                              (call_fingerprint.h). One slot for all operations on purpose:
//                              Gloo delivers one pair's messages on one slot in order, so a
//                              peer that is an operation ahead or behind is seen as such, not
//                              as a message that never comes
//
// The synchronous lane (sync_lane.h) uses no Gloo slot: its connections are its own.
//
// Operations of one group run strictly one after another, so a tag is only ever reused (after
// a wrap) by an operation that cannot overlap the earlier one. A fast peer's message for the next operation may arrive
// early: its slot differs from the current operation's, and Gloo holds it until the receiver is posted.
#pragma once

#include <cstdint>

namespace ringtorch {

constexpr uint32_t kCreationTag = 0xFFFFFF00u;

constexpr uint32_t operation_tag(uint32_t sequence) { return sequence & 0x7FFFFFFFu; }

constexpr uint64_t point_to_point_slot(uint32_t user_tag) { return (uint64_t{1} << 40) | user_tag; }
constexpr uint64_t direct_allreduce_slot(uint32_t tag) { return (uint64_t{1} << 41) | tag; }
constexpr uint64_t fingerprint_slot() { return uint64_t{1} << 42; }
constexpr uint64_t point_to_point_part_slot(uint32_t user_tag, uint32_t k, uint32_t part) {
  return (uint64_t{1} << 43) | (uint64_t{part & 1u} << 44) | (uint64_t{k & 0x3FFu} << 45) | user_tag;
}

}  // namespace ringtorch
