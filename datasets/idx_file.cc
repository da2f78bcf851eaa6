#include "datasets/idx_file.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <ringtorch/error.h>

#include "datasets/file_bytes.h"

namespace ringtorch {
namespace {

uint32_t big_endian(const std::vector<uint8_t>& b, size_t at) {
  return (uint32_t{b[at]} << 24) | (uint32_t{b[at + 1]} << 16) | (uint32_t{b[at + 2]} << 8) | uint32_t{b[at + 3]};
}

// Checks magic and length; returns the dimension sizes.
std::vector<int64_t> parse_header(const std::vector<uint8_t>& bytes, const std::string& path, uint32_t magic,
                                  const char* what) {
  const size_t dims = magic & 0xff;
  if (bytes.size() < 4 || big_endian(bytes, 0) != magic) {
    char found[16] = "none";
    if (bytes.size() >= 4) std::snprintf(found, sizeof(found), "0x%08x", big_endian(bytes, 0));
    throw InvalidArgumentError(str_cat(path, ": not an IDX ", what, " file (magic number ", found, ", expected 0x",
                                       magic == 0x803 ? "00000803" : "00000801", ")"));
  }
  const size_t header = 4 + 4 * dims;
  if (bytes.size() < header) {
    throw IoError(str_cat(path, ": truncated header (", bytes.size(), " bytes, the header alone needs ", header, ")"));
  }
  std::vector<int64_t> sizes;
  // Three 32-bit sizes can overflow 64 bits (tests/fuzz/idx_reader_fuzz found it): such a header
  // promises more than any file holds.
  uint64_t payload = 1;
  bool overflow = false;
  std::string shape;
  for (size_t d = 0; d < dims; ++d) {
    sizes.push_back(big_endian(bytes, 4 + 4 * d));
    shape += (d == 0 ? "" : "x") + std::to_string(sizes.back());
    overflow |= __builtin_mul_overflow(payload, static_cast<uint64_t>(sizes.back()), &payload);
  }
  overflow |= payload > std::numeric_limits<uint64_t>::max() - header;
  if (overflow) {
    throw IoError(str_cat(path, ": truncated: ", bytes.size(), " bytes, the header promises sizes ", shape,
                          " (more than 2^64 bytes)"));
  }
  const size_t expected = header + static_cast<size_t>(payload);
  if (bytes.size() != expected) {
    throw IoError(str_cat(path, ": ", bytes.size() < expected ? "truncated" : "too long", ": ", bytes.size(),
                          " bytes, the header promises ", expected));
  }
  return sizes;
}

}  // namespace

at::Tensor read_idx_images(const std::string& path) {
  const auto bytes = read_file_bytes(path);
  const auto sizes = parse_header(bytes, path, 0x803, "image");
  if (sizes[1] != 28 || sizes[2] != 28) {
    throw InvalidArgumentError(str_cat(path, ": images are ", sizes[1], "x", sizes[2], ", expected 28x28"));
  }
  at::Tensor images = at::empty({sizes[0], sizes[1], sizes[2]}, at::kByte);
  // A file without images has a tensor without storage: no copy (memcpy from a null pointer is UB).
  if (images.numel() > 0)
    std::memcpy(images.data_ptr<uint8_t>(), bytes.data() + 16, static_cast<size_t>(images.numel()));
  return images;
}

at::Tensor read_idx_labels(const std::string& path, int classes) {
  const auto bytes = read_file_bytes(path);
  const auto sizes = parse_header(bytes, path, 0x801, "label");
  at::Tensor labels = at::empty({sizes[0]}, at::kLong);
  int64_t* out = labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < sizes[0]; ++i) {
    out[i] = bytes[8 + i];
    if (out[i] >= classes) {
      throw InvalidArgumentError(str_cat(path, ": label ", out[i], " at index ", i, " is outside [0, ", classes, ")"));
    }
  }
  return labels;
}

}  // namespace ringtorch
