// The CIFAR-10 reader on files written here in the binary format (Debian packages no CIFAR-10;
// the format is fully specified by its 3073-byte records): values, channel order, the
// per-channel normalisation, and every way a file can be wrong.
#include "datasets/cifar_file.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <ringtorch/error.h>
#include <ringtorch/image_dataset.h>

#include "support/error_of.h"
#include "support/test_paths.h"

namespace ringtorch {
namespace {

// Record i: label i % 10; pixel (c, y, x) = (i + 7c + y + 3x) % 256.
std::vector<uint8_t> records(int64_t count, int64_t first = 0) {
  std::vector<uint8_t> bytes;
  for (int64_t i = first; i < first + count; ++i) {
    bytes.push_back(static_cast<uint8_t>(i % 10));
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) bytes.push_back(static_cast<uint8_t>((i + 7 * c + y + 3 * x) % 256));
  }
  return bytes;
}

void write(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

using testing::error_of;

TEST(Cifar10File, ReadsLabelsAndPlanarRgbPixels) {
  testing::TempDir dir;
  write(dir.file("b.bin"), records(5));
  auto [images, labels] = read_cifar10_batch(dir.file("b.bin"));
  ASSERT_EQ(images.sizes(), (std::vector<int64_t>{5, 3, 32, 32}));
  EXPECT_EQ(labels[3].item<int64_t>(), 3);
  EXPECT_EQ(images[4][2][5][6].item<uint8_t>(), (4 + 14 + 5 + 18) % 256);
  EXPECT_EQ(images[0][1][0][31].item<uint8_t>(), (7 + 93) % 256);
}

TEST(Cifar10File, RefusesPartialRecordsEmptyFilesAndBadLabels) {
  testing::TempDir dir;
  auto bytes = records(3);
  bytes.pop_back();
  write(dir.file("short.bin"), bytes);
  EXPECT_NE(error_of<IoError>([&] {
              read_cifar10_batch(dir.file("short.bin"));
            }).find("9218 bytes is not a whole number of 3073-byte"),
            std::string::npos);
  write(dir.file("empty.bin"), {});
  EXPECT_NE(error_of<IoError>([&] { read_cifar10_batch(dir.file("empty.bin")); }).find("empty file"),
            std::string::npos);
  bytes = records(3);
  bytes[2 * kCifarRecordBytes] = 42;
  write(dir.file("label.bin"), bytes);
  const std::string why = error_of<InvalidArgumentError>([&] { read_cifar10_batch(dir.file("label.bin")); });
  EXPECT_NE(why.find("label.bin: record 2 has label 42"), std::string::npos) << why;
  EXPECT_NE(error_of<IoError>([&] { read_cifar10_batch(dir.file("absent.bin")); }).find("absent.bin"),
            std::string::npos);
}

TEST(Cifar10Dataset, LoadsTheSplitsFromTheTarballFolderAndNormalisesPerChannel) {
  testing::TempDir dir;
  const std::string folder = dir.file("cifar-10-batches-bin");
  std::filesystem::create_directory(folder);
  for (int b = 0; b < 5; ++b) write(folder + "/data_batch_" + std::to_string(b + 1) + ".bin", records(4, 4 * b));
  write(folder + "/test_batch.bin", records(2, 100));
  ImageDataset train = load_dataset("cifar10", dir.path(), /*train=*/true);
  ImageDataset test = load_dataset("cifar10", dir.path(), /*train=*/false);
  ASSERT_EQ(train.size(), 20);
  ASSERT_EQ(test.size(), 2);
  EXPECT_EQ(train.channels(), 3);
  EXPECT_EQ(train.height(), 32);
  EXPECT_EQ(train.labels[13].item<int64_t>(), 3);  // batches in order: record 13 is batch 4's second
  // (x / 255 - mean[c]) / std[c] with the green channel's mean 0.4822 and std 0.2435.
  const double raw = (13 + 7 * 1 + 2 + 3 * 9) % 256;
  EXPECT_NEAR(train.images[13][1][2][9].item<float>(), (raw / 255 - 0.4822) / 0.2435, 1e-5);
  EXPECT_NEAR(test.images[1][0][0][0].item<float>(), (101.0 / 255 - 0.4914) / 0.2470, 1e-5);
}

TEST(Cifar10Dataset, AMissingBatchOrDirectoryIsNamed) {
  testing::TempDir dir;
  for (int b = 0; b < 4; ++b) write(dir.file("data_batch_" + std::to_string(b + 1) + ".bin"), records(1));
  const std::string why = error_of<IoError>([&] { load_dataset("cifar10", dir.path(), true); });
  EXPECT_NE(why.find("missing dataset file " + dir.file("data_batch_5.bin")), std::string::npos) << why;
  EXPECT_NE(error_of<InvalidArgumentError>([&] { load_dataset("cifar10", "", true); }).find("needs --data-dir"),
            std::string::npos);
  EXPECT_NE(
      error_of<InvalidArgumentError>([&] { load_dataset("cifar100", "", true); }).find("known datasets: cifar10,"),
      std::string::npos);
}

}  // namespace
}  // namespace ringtorch
