#include "datasets/cifar_file.h"

#include <ATen/ATen.h>

#include <cstring>

#include <ringtorch/error.h>

#include "datasets/file_bytes.h"

namespace ringtorch {

std::pair<at::Tensor, at::Tensor> read_cifar10_batch(const std::string& path) {
  const auto bytes = read_file_bytes(path);
  const int64_t size = static_cast<int64_t>(bytes.size());
  if (size == 0)
    throw IoError(str_cat(path, ": empty file, expected CIFAR-10 records of ", kCifarRecordBytes, " bytes"));
  if (size % kCifarRecordBytes != 0) {
    throw IoError(str_cat(path, ": ", size, " bytes is not a whole number of ", kCifarRecordBytes,
                          "-byte CIFAR-10 records (1 label + 3072 pixels); truncated, or not a CIFAR-10 binary batch"));
  }
  const int64_t count = size / kCifarRecordBytes;
  at::Tensor images = at::empty({count, 3, 32, 32}, at::kByte);
  at::Tensor labels = at::empty({count}, at::kLong);
  uint8_t* image_out = images.data_ptr<uint8_t>();
  int64_t* label_out = labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t* record = bytes.data() + i * kCifarRecordBytes;
    if (record[0] > 9) {
      throw InvalidArgumentError(str_cat(path, ": record ", i, " has label ", int{record[0]},
                                         "; CIFAR-10 labels are 0-9 (is this the CIFAR-100 format?)"));
    }
    label_out[i] = record[0];
    std::memcpy(image_out + i * (kCifarRecordBytes - 1), record + 1, kCifarRecordBytes - 1);
  }
  return {images, labels};
}

std::vector<std::string> cifar10_batch_names(bool train) {
  if (!train) return {"test_batch.bin"};
  return {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"};
}

}  // namespace ringtorch
