// The process group's tables: operation names, the call descriptions' text (str_cat, human_bytes), call signatures, the
// tag space, the reduction kernels, the one reader of Gloo's exception text (one case per message shape of the Gloo
// ringtorch links) and the address directory that turns its address into a rank.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <ringtorch/str_cat.h>

#include "runtime/comm/call_signature.h"
#include "runtime/comm/failure_report.h"
#include "runtime/comm/gloo_failure.h"
#include "runtime/comm/op_type.h"
#include "runtime/comm/reduce_kernels.h"
#include "runtime/comm/tag_space.h"
#include "runtime/comm/tensor_checks.h"

namespace ringtorch {
namespace {

// human_bytes formats without printf; it must print what printf's "%.1f" printed, ties included
// (1280 B is 1.25 KiB: "1.2", as printf rounds the exact binary value to even).
TEST(HumanBytes, PrintsWhatPrintfPrinted) {
  auto printf_version = [](int64_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024 && u < 3) v /= 1024, ++u;
    char text[32];
    std::snprintf(text, sizeof(text), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
    return std::string(text);
  };
  std::vector<int64_t> sizes = {
      0, 1, 4, 1023, 1024, 1075, 1280, 1331, 1792, 1023 * 1024, 1048575, 16 << 20, (int64_t{1} << 40) * 5 + 3};
  for (int64_t b = 1; b < (int64_t{1} << 36); b = b * 3 + 7) sizes.push_back(b);
  for (int64_t b = 1000; b < 40000; b += 37) sizes.push_back(b);  // every tenth's boundary of a few KiB
  for (const int64_t bytes : sizes) EXPECT_EQ(human_bytes(bytes), printf_version(bytes)) << bytes;
  EXPECT_EQ(human_bytes(1280), "1.2 KiB");
  EXPECT_EQ(human_bytes(16 << 20), "16.0 MiB");
}

// str_cat appends strings, characters and integers itself and streams the rest: every part must
// print as it does on a stream.
TEST(StrCat, PrintsEveryPartAsAStreamWould) {
  const std::string text = "text";
  const std::string_view view = "view";
  const char* null_text = nullptr;
  const uint8_t byte = 65;
  const int8_t signed_byte = 66;
  std::ostringstream expected;
  expected << "a" << text << view << 'c' << -7 << 42u << int64_t{-9000000000} << uint64_t{18000000000000000000u} << true
           << false << byte << signed_byte << 0.5 << 1e-7 << 2.5f << static_cast<short>(-3);
  EXPECT_EQ(str_cat("a", text, view, 'c', -7, 42u, int64_t{-9000000000}, uint64_t{18000000000000000000u}, true, false,
                    byte, signed_byte, 0.5, 1e-7, 2.5f, static_cast<short>(-3)),
            expected.str());
  EXPECT_EQ(str_cat("before ", null_text, "after"), "before after");
  EXPECT_EQ(str_cat(), "");
}

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
  std::set<uint64_t> slots = {fingerprint_slot()};
  size_t expected = 1;
  for (uint32_t tag : {0u, 7u, 0xFFFFFFFFu}) {
    std::vector<uint64_t> of_tag = {point_to_point_slot(tag), direct_allreduce_slot(tag)};
    for (uint32_t k : {0u, 1u, 1023u}) {
      for (uint32_t part : {0u, 1u}) of_tag.push_back(point_to_point_part_slot(tag, k, part));
    }
    EXPECT_EQ(point_to_point_part_slot(tag, 1024, 1), point_to_point_part_slot(tag, 0, 1)) << "k counts mod 2^10";
    for (uint64_t slot : of_tag) {
      EXPECT_EQ(slot >> 56, 0u);
      EXPECT_GE(slot, uint64_t{1} << 32);
      EXPECT_EQ(slot & 0xFFFFFFFFu, tag);
      slots.insert(slot);
    }
    expected += of_tag.size();
  }
  EXPECT_EQ(slots.size(), expected) << "two kinds of message share a slot";
  EXPECT_EQ(fingerprint_slot() >> 56, 0u);
}

// Every kernel against ATen's own op, out of place and in place on either input, at lengths
// around the kernels' block (128 bytes) so that the blocked part and the tail both run.
TEST(ReduceKernels, MatchAtenOutOfPlaceAndInPlace) {
  const std::vector<std::pair<ReduceOp, at::Tensor (*)(const at::Tensor&, const at::Tensor&)>> ops = {
      {ReduceOp::kSum, [](const at::Tensor& a, const at::Tensor& b) { return a + b; }},
      {ReduceOp::kProduct, [](const at::Tensor& a, const at::Tensor& b) { return a * b; }},
      {ReduceOp::kMin, [](const at::Tensor& a, const at::Tensor& b) { return at::minimum(a, b); }},
      {ReduceOp::kMax, [](const at::Tensor& a, const at::Tensor& b) { return at::maximum(a, b); }}};
  for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kInt, at::kLong, at::kByte}) {
    for (const auto& [op, aten] : ops) {
      const ReduceFunction reduce = reduce_function(op, dtype);
      for (int64_t n : {0, 1, 15, 16, 17, 127, 128, 129, 1000}) {
        at::Tensor a = at::randint(1, 9, {n}).to(dtype), b = at::randint(1, 9, {n}).to(dtype);
        const at::Tensor want = aten(a, b);
        at::Tensor out = at::empty_like(a);
        reduce(out.data_ptr(), a.data_ptr(), b.data_ptr(), n);
        EXPECT_TRUE(at::equal(out, want)) << reduce_op_name(op) << " " << c10::toString(dtype) << " n=" << n;
        at::Tensor in_a = a.clone(), in_b = b.clone();
        reduce(in_a.data_ptr(), in_a.data_ptr(), b.data_ptr(), n);
        reduce(in_b.data_ptr(), a.data_ptr(), in_b.data_ptr(), n);
        EXPECT_TRUE(at::equal(in_a, want)) << "in place on a: " << reduce_op_name(op) << " n=" << n;
        EXPECT_TRUE(at::equal(in_b, want)) << "in place on b: " << reduce_op_name(op) << " n=" << n;
      }
    }
  }
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

// Addresses as rank 0 of 4 could see them across hosts: peer 1 on a host of its own, peers 2
// and 3 on one host. Gloo may name the port a peer listened on during set-up instead of the
// one it published.
TEST(FailureReport, NamesThePeerByItsAddressOrByItsHostAlone) {
  const std::vector<std::string> published = {"", "[10.1.0.11]:53778", "[10.1.0.12]:57510", "[10.1.0.12]:38334"};
  EXPECT_EQ(peer_named_by_address(published, 0, "[10.1.0.11]:53778"), 1);   // exact
  EXPECT_EQ(peer_named_by_address(published, 0, "[10.1.0.12]:38334"), 3);   // exact, on a shared host
  EXPECT_EQ(peer_named_by_address(published, 0, "[10.1.0.11]:36575"), 1);   // the one peer on its host
  EXPECT_EQ(peer_named_by_address(published, 0, "[10.1.0.12]:36575"), -1);  // two peers there: the roll call tells
  EXPECT_EQ(peer_named_by_address(published, 0, "[10.1.0.13]:36575"), -1);  // no peer there
  EXPECT_EQ(peer_named_by_address(published, 0, ""), -1);                   // Gloo named no address
  EXPECT_EQ(peer_named_by_address({"[::1]:4312", "", "[10.1.0.11]:1"}, 1, "[::1]:9"), 0);
  // A host is compared whole: 10.1.0.1 is not a prefix match for 10.1.0.11.
  EXPECT_EQ(peer_named_by_address({"", "[10.1.0.11]:53778"}, 0, "[10.1.0.1]:53778"), -1);
  // A peer that published nothing may be the one on that host: no guess by host then.
  EXPECT_EQ(peer_named_by_address({"", "", "[10.1.0.12]:1"}, 0, "[10.1.0.12]:9"), -1);
  EXPECT_EQ(peer_named_by_address({"", "", "[10.1.0.12]:1"}, 0, "[10.1.0.12]:1"), 2);  // exact still names it
}

}  // namespace
}  // namespace ringtorch
