#include "datasets/file_bytes.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace ringtorch {

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file) throw IoError(str_cat("cannot open ", path, ": ", errno_text(errno)));
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> chunk(1 << 20);
  while (true) {
    const int n = gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int code = 0;
      const std::string why = gzerror(file, &code);
      gzclose(file);
      throw IoError(str_cat(path, ": corrupt or truncated gzip data (", why, ")"));
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + n);
  }
  gzclose(file);
  return bytes;
}

}  // namespace ringtorch
