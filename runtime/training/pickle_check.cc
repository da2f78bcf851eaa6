#include "runtime/training/pickle_check.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <ringtorch/error.h>
#include <ringtorch/str_cat.h>

namespace ringtorch {

void check_tensor_within_storage(const at::Tensor& t, const std::string& what) {
  auto fail = [&](const std::string& why) {
    throw IoError(str_cat(what, " is not a dense tensor within its storage (", why, ")"));
  };
  if (t.layout() != at::kStrided || !t.has_storage()) fail("not strided");
  if (t.numel() == 0) return;
  if (t.storage_offset() < 0) fail("negative offset");
  // The last element's index in the storage, in elements; every step checked for overflow.
  uint64_t last = static_cast<uint64_t>(t.storage_offset());
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) < 0) fail("negative stride");
    uint64_t step = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(t.size(d) - 1), static_cast<uint64_t>(t.stride(d)), &step) ||
        __builtin_add_overflow(last, step, &last)) {
      fail("sizes and strides overflow");
    }
  }
  uint64_t needed = 0;
  if (__builtin_mul_overflow(last + 1, static_cast<uint64_t>(t.element_size()), &needed) ||
      needed > t.storage().nbytes()) {
    fail(str_cat("it reaches byte ", needed, " of a storage of ", t.storage().nbytes()));
  }
}

namespace {

uint64_t little_endian(const char* p, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = value << 8 | static_cast<unsigned char>(p[i]);
  return value;
}

}  // namespace

void check_zip_entry_sizes(const char* data, size_t size, const std::string& path) {
  auto fail = [&](const std::string& what) {
    throw IoError(str_cat("checkpoint ", path, ": its zip directory is damaged: ", what));
  };
  // The end-of-central-directory record: 22 bytes plus a comment of up to 65535, at the end.
  constexpr size_t kEndRecord = 22;
  if (size < kEndRecord) fail("the file is shorter than a zip archive");
  size_t end = size - kEndRecord;
  const size_t lowest = size > kEndRecord + 65535 ? size - kEndRecord - 65535 : 0;
  while (little_endian(data + end, 4) != 0x06054b50) {
    if (end == lowest) fail("no end-of-directory record");
    --end;
  }
  uint64_t entries = little_endian(data + end + 10, 2);
  uint64_t directory = little_endian(data + end + 16, 4);
  if (entries == 0xFFFF || directory == 0xFFFFFFFF) {  // zip64: its own end record, found by a locator
    if (end < 20 || little_endian(data + end - 20, 4) != 0x07064b50) fail("no zip64 locator");
    const uint64_t record = little_endian(data + end - 20 + 8, 8);
    if (size < 56 || record > size - 56 || little_endian(data + record, 4) != 0x06064b50) fail("no zip64 end record");
    entries = little_endian(data + record + 32, 8);
    directory = little_endian(data + record + 48, 8);
  }
  uint64_t at = directory;
  for (uint64_t e = 0; e < entries; ++e) {
    if (at > size - 46 || size < 46 || little_endian(data + at, 4) != 0x02014b50) fail("an entry runs past the end");
    uint64_t uncompressed = little_endian(data + at + 24, 4);
    const uint64_t name = little_endian(data + at + 28, 2), extra = little_endian(data + at + 30, 2),
                   comment = little_endian(data + at + 32, 2);
    if (at + 46 + name + extra + comment > size) fail("an entry runs past the end");
    if (uncompressed == 0xFFFFFFFF) {  // the real size is in the zip64 extra field (id 1), first
      for (uint64_t x = at + 46 + name; x + 4 <= at + 46 + name + extra;) {
        const uint64_t id = little_endian(data + x, 2), length = little_endian(data + x + 2, 2);
        if (id == 1 && length >= 8 && x + 12 <= size) uncompressed = little_endian(data + x + 4, 8);
        x += 4 + length;
      }
    }
    if (uncompressed > size) {
      fail(str_cat("entry ", std::string(data + at + 46, static_cast<size_t>(name)), " claims ", uncompressed,
                   " bytes in a file of ", size));
    }
    at += 46 + name + extra + comment;
  }
}

}  // namespace ringtorch
