// Reading a dataset file whole into memory, gunzipped when it is gzip (by its first two bytes,
// not its name). Every gzip member's CRC-32 and length trailer is checked. Shared by the IDX and
// CIFAR readers.
//
// Thread-safety: a free function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringtorch {

// Throws IoError naming the file: missing or unreadable, a directory, corrupt or truncated gzip
// data (including a trailer that is cut off or does not match).
std::vector<uint8_t> read_file_bytes(const std::string& path);

}  // namespace ringtorch
