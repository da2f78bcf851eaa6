// Reading a dataset file whole into memory, gunzipped when it is gzip (by its first bytes, not
// its name: zlib passes plain files through unchanged). Shared by the IDX and CIFAR readers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringtorch {

// Throws IoError naming the file: cannot open, corrupt or truncated gzip data.
std::vector<uint8_t> read_file_bytes(const std::string& path);

}  // namespace ringtorch
