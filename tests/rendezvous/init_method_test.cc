#include "rendezvous/init_method.h"

#include <gtest/gtest.h>

#include <ringtorch/error.h>

namespace ringtorch {
namespace {

TEST(InitMethod, Env) {
  auto m = parse_init_method("env://");
  EXPECT_EQ(m.scheme, InitScheme::kEnv);
  EXPECT_FALSE(m.rank.has_value());
}

TEST(InitMethod, TcpWithQuery) {
  auto m = parse_init_method("tcp://192.168.1.201:23456?rank=2&world_size=3&timeout=1.5");
  EXPECT_EQ(m.scheme, InitScheme::kTcp);
  EXPECT_EQ(m.host, "192.168.1.201");
  EXPECT_EQ(m.port, 23456);
  EXPECT_EQ(m.rank, 2);
  EXPECT_EQ(m.world_size, 3);
  EXPECT_EQ(m.timeout->count(), 1500);
}

TEST(InitMethod, TcpIpv6) {
  auto m = parse_init_method("tcp://[::1]:29500");
  EXPECT_EQ(m.host, "::1");
  EXPECT_EQ(m.port, 29500);
}

TEST(InitMethod, File) {
  auto m = parse_init_method("file:///shared/job%2042");
  EXPECT_EQ(m.scheme, InitScheme::kFile);
  EXPECT_EQ(m.path, "/shared/job 42");
}

TEST(InitMethod, RedisDefaultsAndCredentials) {
  auto plain = parse_init_method("redis://cache.local");
  EXPECT_EQ(plain.port, 6379);
  EXPECT_EQ(plain.db, 0);
  EXPECT_TRUE(plain.password.empty());

  auto full = parse_init_method("redis://trainer:s%40cret@10.0.0.2:6380/3");
  EXPECT_EQ(full.user, "trainer");
  EXPECT_EQ(full.password, "s@cret");
  EXPECT_EQ(full.host, "10.0.0.2");
  EXPECT_EQ(full.port, 6380);
  EXPECT_EQ(full.db, 3);
  EXPECT_EQ(full.text.find("cret"), std::string::npos) << "the password must never be printed: " << full.text;

  auto password_only = parse_init_method("redis://:pw@h:1");
  EXPECT_EQ(password_only.user, "");
  EXPECT_EQ(password_only.password, "pw");
}

// Every malformed URL is rejected with a message that names the value and says what to do.
struct BadUrl {
  const char* url;
  const char* expected_fragment;
};

class InitMethodRejects : public ::testing::TestWithParam<BadUrl> {};

TEST_P(InitMethodRejects, WithClearMessage) {
  try {
    parse_init_method(GetParam().url);
    FAIL() << "accepted " << GetParam().url;
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().expected_fragment), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, InitMethodRejects,
    ::testing::Values(BadUrl{"127.0.0.1:23456", "no scheme"}, BadUrl{"udp://h:1", "unknown scheme 'udp://'"},
                      BadUrl{"tcp://host", "no port"}, BadUrl{"tcp://host:", "empty port"},
                      BadUrl{"tcp://host:99999", "outside [1, 65535]"}, BadUrl{"tcp://host:abc", "not an integer"},
                      BadUrl{"tcp://:29500", "no host"}, BadUrl{"tcp://h:1/x", "no path"}, BadUrl{"file://", "no path"},
                      BadUrl{"file://relative/x", "must be absolute"}, BadUrl{"file:///tmp/", "names a directory"},
                      BadUrl{"redis://:@h", "empty password"}, BadUrl{"redis://h:1/db", "not an integer"},
                      BadUrl{"env://host", "takes no host"}, BadUrl{"tcp://h:1?rank=-1", "outside"},
                      BadUrl{"tcp://h:1?speed=3", "unknown query parameter"},
                      BadUrl{"tcp://h:1?timeout=0", "must be positive"},
                      BadUrl{"tcp://h:1?timeout=1e300", "more than the longest timeout, 2592000 (30 days)"},
                      BadUrl{"tcp://h:1?timeout=1e10", "more than the longest timeout"},
                      BadUrl{"tcp://h:1?timeout=1e-9", "below 1 ms"}, BadUrl{"tcp://[::1:5", "unterminated"},
                      BadUrl{"file:///tmp/a%2", "truncated"}, BadUrl{"file:///tmp/a%-1", "bad %-escape '%-1'"},
                      BadUrl{"file:///tmp/a% f", "bad %-escape"}));

// Numbers are read to the last byte: "01\0garbage" is not 1 (strtod stops at the NUL; the init
// method fuzzer found a URL whose timeout read so, with the password echoed after it).
TEST(InitMethod, EmbeddedNulBytesAreRejected) {
  for (const std::string& url : {std::string("tcp://h:1?timeout=01\0x", 22), std::string("tcp://h:1\0", 10),
                                 std::string("tcp://h:1?rank=0\0&world_size=2", 30)}) {
    EXPECT_THROW(parse_init_method(url), InvalidArgumentError) << url.size();
  }
}

TEST(InitMethod, MasksPasswordInErrors) {
  try {
    parse_init_method("redis://u:topsecret@h:notaport");
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_EQ(std::string(e.what()).find("topsecret"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ringtorch
