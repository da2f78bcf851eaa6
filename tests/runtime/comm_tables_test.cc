// The process group's tables: operation names, call signatures, the tag space, and the one
// reader of Gloo's exception text (one case per message shape of the Gloo ringtorch links).
#include <gtest/gtest.h>

#include <set>

#include "runtime/comm/call_signature.h"
#include "runtime/comm/gloo_failure.h"
#include "runtime/comm/op_type.h"
#include "runtime/comm/tag_space.h"

namespace ringtorch {
namespace {

TEST(OpType, EveryOperationHasOneNameAndReadsBack) {
  std::set<std::string> names;
  for (int i = 0; i < kOpTypeCount; ++i) {
    const auto op = static_cast<OpType>(i);
    const std::string name = op_type_name(op);
    EXPECT_NE(name, "?");
    EXPECT_TRUE(names.insert(name).second) << name << " twice";
    ASSERT_TRUE(op_type_from_name(name).has_value()) << name;
    EXPECT_EQ(*op_type_from_name(name), op);
  }
  EXPECT_FALSE(op_type_from_name("all_reduce").has_value());
  EXPECT_TRUE(op_has_root(OpType::kScatter));
  EXPECT_FALSE(op_has_root(OpType::kAllgather));
  EXPECT_TRUE(op_reduces(OpType::kReduceScatter));
  EXPECT_FALSE(op_reduces(OpType::kBroadcast));
}

TEST(CallSignature, RoundTripsAndDescribesItself) {
  const CallSignature allreduce{OpType::kAllreduce, 10, c10::ScalarType::Float, -1, ReduceOp::kMax};
  const CallSignature::Words words = allreduce.encode();
  EXPECT_EQ(CallSignature::decode(words.data()), allreduce);
  EXPECT_EQ(allreduce.describe(), "allreduce of 10 float32 max");
  EXPECT_EQ((CallSignature{OpType::kBroadcast, 4, c10::ScalarType::Double, 0}).describe(),
            "broadcast of 4 float64 (root 0)");
  EXPECT_EQ(CallSignature{}.describe(), "barrier");
  CallSignature other = allreduce;
  other.dtype = c10::ScalarType::Int;
  EXPECT_NE(other, allreduce);
  // A code from a rank running other code is printed, not looked up past the table.
  CallSignature::Words strange = words;
  strange[0] = 200;
  EXPECT_NE(CallSignature::decode(strange.data()).describe().find("operation #200"), std::string::npos);
}

TEST(TagSpace, OperationAndCreationTagsAreApart) {
  for (uint32_t sequence : {0u, 1u, 12345u, 0x7FFFFFFEu, 0xFFFFFF00u}) {
    EXPECT_NE(operation_tag(sequence), kCreationTag);
    if (sequence < 0x80000000u) {
      EXPECT_EQ(operation_tag(sequence), sequence);
    }
  }
  EXPECT_EQ(operation_tag(0x80000005u), 5u) << "sequence numbers wrap inside the operation range";
  // ringtorch's own slots never meet each other or Gloo's (prefix in bits 56-63, tag below 2^32).
  for (uint32_t tag : {0u, 7u, 0xFFFFFFFFu}) {
    EXPECT_NE(point_to_point_slot(tag), direct_allreduce_slot(tag));
    EXPECT_EQ(point_to_point_slot(tag) >> 56, 0u);
    EXPECT_EQ(direct_allreduce_slot(tag) >> 56, 0u);
    EXPECT_GE(point_to_point_slot(tag), uint64_t{1} << 32);
    EXPECT_GE(direct_allreduce_slot(tag), uint64_t{1} << 32);
    EXPECT_NE(fingerprint_slot(), point_to_point_slot(tag));
    EXPECT_NE(fingerprint_slot(), direct_allreduce_slot(tag));
    for (uint32_t k : {0u, 1u, 1023u, 1024u, 0xFFFFFFFFu}) {
      for (uint32_t part : {0u, 1u}) {
        const uint64_t slot = point_to_point_part_slot(tag, k, part);
        EXPECT_EQ(slot >> 56, 0u);
        EXPECT_GE(slot, uint64_t{1} << 32);
        EXPECT_NE(slot, point_to_point_slot(tag));
        EXPECT_NE(slot, direct_allreduce_slot(tag));
        EXPECT_NE(slot, fingerprint_slot());
        EXPECT_EQ(slot & 0xFFFFFFFFu, tag);
      }
      EXPECT_NE(point_to_point_part_slot(tag, k, 0), point_to_point_part_slot(tag, k, 1));
    }
    EXPECT_NE(point_to_point_part_slot(tag, 0, 1), point_to_point_part_slot(tag, 1, 1));
  }
  EXPECT_EQ(fingerprint_slot() >> 56, 0u);
}

struct GlooShape {
  const char* text;
  ErrorKind kind;
  const char* address;
};

TEST(GlooFailure, ReadsEveryMessageShapeOfGloo) {
  const GlooShape shapes[] = {
      {"[/build/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 3000ms for recv operation to complete",
       ErrorKind::kTimeout, ""},
      {"[/build/gloo/gloo/transport/tcp/unbound_buffer.cc:133] Timed out waiting 500ms for send operation to complete",
       ErrorKind::kTimeout, ""},
      {"[/build/gloo/gloo/transport/tcp/pair.cc:598] Read error [127.0.0.1]:41873: Connection reset by peer",
       ErrorKind::kPeerLost, "[127.0.0.1]:41873"},
      {"[/build/gloo/gloo/transport/tcp/pair.cc:589] Connection closed by peer [10.0.0.3]:5512", ErrorKind::kPeerLost,
       "[10.0.0.3]:5512"},
      {"[gloo/transport/tcp/pair.cc:400] writev [10.0.0.3]:5512: Broken pipe", ErrorKind::kPeerLost, "[10.0.0.3]:5512"},
      {"[gloo/transport/tcp/pair.cc:170] Socket closed [127.0.0.1]:4312", ErrorKind::kPeerLost, "[127.0.0.1]:4312"},
      {"[gloo/transport/tcp/pair.cc:170] Socket unexpectedly closed [::1]:4312", ErrorKind::kPeerLost, "[::1]:4312"},
      {"[gloo/transport/tcp/pair.cc:640] Read timeout [127.0.0.1]:4312", ErrorKind::kTimeout, "[127.0.0.1]:4312"},
      {"[gloo/transport/tcp/pair.cc:420] Write timeout [127.0.0.1]:4312", ErrorKind::kTimeout, "[127.0.0.1]:4312"},
      {"[gloo/transport/tcp/pair.cc:800] Connect timeout [10.0.0.5]:41235", ErrorKind::kTimeout, "[10.0.0.5]:41235"},
      {"[gloo/transport/tcp/pair.cc:830] Application timeout caused pair closure", ErrorKind::kTimeout, ""},
      {"something Gloo has never said", ErrorKind::kPeerLost, ""},
  };
  for (const auto& shape : shapes) {
    const GlooFailure failure = read_gloo_failure(shape.text);
    EXPECT_EQ(failure.kind, shape.kind) << shape.text;
    EXPECT_EQ(failure.peer_address, shape.address) << shape.text;
  }
}

}  // namespace
}  // namespace ringtorch
