// CIFAR-10 binary batches (https://www.cs.toronto.edu/~kriz/cifar.html, "binary version"):
// data_batch_1.bin ... data_batch_5.bin (train) and test_batch.bin, each a run of 3073-byte
// records: one label byte (0-9), then 1024 red, 1024 green and 1024 blue bytes of a 32x32
// image in row-major order. Plain or gzip-compressed.
//
// Every check names the file and the problem: a length that is not a whole number of records,
// an empty file, a label outside 0-9.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace ringtorch {

constexpr int64_t kCifarRecordBytes = 1 + 3 * 32 * 32;

// {images uint8 [N, 3, 32, 32], labels int64 [N]}. Throws IoError (unreadable, truncated) or
// InvalidArgumentError (a label out of range).
std::pair<at::Tensor, at::Tensor> read_cifar10_batch(const std::string& path);

// The file names of one split, in order: the five data batches (train) or the test batch.
std::vector<std::string> cifar10_batch_names(bool train);

}  // namespace ringtorch
