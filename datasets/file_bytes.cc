#include "datasets/file_bytes.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include <ringtorch/error.h>

namespace ringtorch {
namespace {

bool is_gzip(const std::vector<uint8_t>& bytes, size_t at) {
  return bytes.size() >= at + 2 && bytes[at] == 0x1f && bytes[at + 1] == 0x8b;
}

// Inflates every gzip member of `compressed` (gzip allows several, one after another). inflate()
// checks each member's CRC-32 and length trailer; a member that ends before its trailer is an
// error, which gzread() would have passed as a shorter file.
std::vector<uint8_t> gunzip(const std::vector<uint8_t>& compressed, const std::string& path) {
  std::vector<uint8_t> out;
  z_stream stream{};
  if (inflateInit2(&stream, 15 + 16) != Z_OK) throw IoError(str_cat(path, ": zlib could not start inflating"));
  stream.next_in = const_cast<Bytef*>(compressed.data());
  stream.avail_in = static_cast<uInt>(compressed.size());  // the caller refuses files over 2 GiB
  std::vector<uint8_t> chunk(1 << 20);
  auto fail = [&](const std::string& why) {
    inflateEnd(&stream);
    throw IoError(str_cat(path, ": corrupt or truncated gzip data (", why, ")"));
  };
  while (true) {
    stream.next_out = chunk.data();
    stream.avail_out = static_cast<uInt>(chunk.size());
    const int code = inflate(&stream, Z_NO_FLUSH);
    out.insert(out.end(), chunk.data(), chunk.data() + (chunk.size() - stream.avail_out));
    if (code == Z_STREAM_END) {
      const size_t consumed = compressed.size() - stream.avail_in;
      if (stream.avail_in == 0) break;
      if (!is_gzip(compressed, consumed)) {
        fail(str_cat(stream.avail_in, " bytes after the end of the gzip data are not another gzip member"));
      }
      inflateReset(&stream);
      continue;
    }
    if (code == Z_OK) continue;
    if (code == Z_BUF_ERROR && stream.avail_in == 0) fail("it ends before its CRC-32 and length trailer");
    fail(stream.msg ? stream.msg : str_cat("zlib error ", code));
  }
  inflateEnd(&stream);
  return out;
}

}  // namespace

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) throw IoError(str_cat("cannot open ", path, ": ", errno_text(errno)));
  if (S_ISDIR(info.st_mode)) throw IoError(str_cat(path, " is a directory, not a dataset file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(str_cat("cannot open ", path, ": ", errno_text(errno)));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw IoError(str_cat("cannot read ", path, ": ", errno_text(errno)));
  if (!is_gzip(bytes, 0)) return bytes;
  if (bytes.size() > (size_t{1} << 31)) throw IoError(str_cat(path, ": gzip file over 2 GiB; unpack it first"));
  return gunzip(bytes, path);
}

}  // namespace ringtorch
