// Dataset files read whole: gzip members inflated with their trailers checked, a directory
// named as such, and a well-formed dataset without records refused. Before: a .gz with 1-9
// bytes cut from its end was accepted (gzread never reached the CRC), a directory was "corrupt
// or truncated gzip data (...: Is a directory)", and 0 records trained to "Loss: 0.0000".
#include "datasets/file_bytes.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include <ringtorch/error.h>
#include <ringtorch/image_dataset.h>

#include "support/error_of.h"
#include "support/test_paths.h"

namespace ringtorch {
namespace {

using testing::error_of;

std::vector<uint8_t> gzip(const std::vector<uint8_t>& plain) {
  std::vector<uint8_t> out(compressBound(plain.size()) + 64);
  z_stream stream{};
  deflateInit2(&stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  stream.next_in = const_cast<Bytef*>(plain.data());
  stream.avail_in = static_cast<uInt>(plain.size());
  stream.next_out = out.data();
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

void write(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>((i * 7 + i / 251) & 0xFF);
  return bytes;
}

TEST(FileBytes, ReadsPlainAndGzipAndSeveralGzipMembers) {
  testing::TempDir dir;
  const auto plain = pattern(100000);
  write(dir.path() + "/plain", plain);
  EXPECT_EQ(read_file_bytes(dir.path() + "/plain"), plain);
  write(dir.path() + "/one.gz", gzip(plain));
  EXPECT_EQ(read_file_bytes(dir.path() + "/one.gz"), plain);
  auto two = gzip(plain);
  const auto second = gzip(pattern(10));
  two.insert(two.end(), second.begin(), second.end());
  write(dir.path() + "/two.gz", two);
  auto expected = plain;
  const auto tail = pattern(10);
  expected.insert(expected.end(), tail.begin(), tail.end());
  EXPECT_EQ(read_file_bytes(dir.path() + "/two.gz"), expected);
}

TEST(FileBytes, AGzipFileCutShortOrDamagedInItsTrailerIsAnError) {
  testing::TempDir dir;
  const auto whole = gzip(pattern(5000));
  for (size_t cut = 1; cut <= 12; ++cut) {
    const std::string path = dir.path() + "/cut.gz";
    write(path, std::vector<uint8_t>(whole.begin(), whole.end() - static_cast<std::ptrdiff_t>(cut)));
    const std::string message = error_of<IoError>([&] { read_file_bytes(path); });
    EXPECT_NE(message.find(path + ": corrupt or truncated gzip data"), std::string::npos) << cut << ": " << message;
  }
  for (size_t from_end : {1u, 5u}) {  // the length, then the CRC-32
    auto damaged = whole;
    damaged[damaged.size() - from_end] ^= 0x40;
    write(dir.path() + "/bad.gz", damaged);
    EXPECT_NE(error_of<IoError>([&] { read_file_bytes(dir.path() + "/bad.gz"); }).find("corrupt or truncated gzip"),
              std::string::npos);
  }
  auto trailing = whole;
  trailing.push_back('x');
  write(dir.path() + "/trailing.gz", trailing);
  EXPECT_NE(error_of<IoError>([&] { read_file_bytes(dir.path() + "/trailing.gz"); }).find("not another gzip member"),
            std::string::npos);
}

TEST(FileBytes, ADirectoryOrAMissingFileIsNamedAsSuch) {
  testing::TempDir dir;
  std::filesystem::create_directory(dir.path() + "/train-images-idx3-ubyte");
  EXPECT_EQ(error_of<IoError>([&] { read_file_bytes(dir.path() + "/train-images-idx3-ubyte"); }),
            dir.path() + "/train-images-idx3-ubyte is a directory, not a dataset file");
  EXPECT_NE(error_of<IoError>([&] { read_file_bytes(dir.path() + "/absent"); }).find("No such file or directory"),
            std::string::npos);
}

// IDX files with valid headers that promise 0 records.
void write_empty_idx(const std::string& dir, const std::string& prefix) {
  write(dir + "/" + prefix + "-images-idx3-ubyte", {0, 0, 8, 3, 0, 0, 0, 0, 0, 0, 0, 28, 0, 0, 0, 28});
  write(dir + "/" + prefix + "-labels-idx1-ubyte", {0, 0, 8, 1, 0, 0, 0, 0});
}

TEST(FileBytes, ADatasetWithoutRecordsIsRefused) {
  testing::TempDir dir;
  write_empty_idx(dir.path(), "train");
  write_empty_idx(dir.path(), "t10k");
  for (bool train : {true, false}) {
    const std::string message = error_of<InvalidArgumentError>([&] { load_dataset("mnist", dir.path(), train); });
    EXPECT_NE(message.find("(0 images from " + dir.path() + "): no records"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace ringtorch
