// IDX files, the format of MNIST and Fashion-MNIST (http://yann.lecun.com/exdb/mnist/): a
// big-endian header (magic 0x00000803 for uint8 images with 3 dimensions, 0x00000801 for
// uint8 labels with 1), the dimension sizes, then the data. Plain or gzip-compressed (by the
// file's first two bytes, not its name).
//
// Every check names the file and the problem: a wrong magic number, an unexpected dimension
// count or size, a file shorter or longer than its header says, gzip damage.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace ringtorch {

// uint8 [count, rows, cols]. Throws IoError (unreadable, truncated, corrupt gzip) or
// InvalidArgumentError (not an image file, unexpected sizes).
at::Tensor read_idx_images(const std::string& path);
// int64 [count]; throws like read_idx_images. `classes` bounds the label values.
at::Tensor read_idx_labels(const std::string& path, int classes = 10);

}  // namespace ringtorch
