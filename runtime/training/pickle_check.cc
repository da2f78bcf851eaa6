#include "runtime/training/pickle_check.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/error.h"
#include "base/str_cat.h"

namespace ringtorch {
namespace {

// How an opcode's argument is laid out (the pickle protocol, versions 0 to 5).
enum class Argument : uint8_t {
  kUnknown,  // not an opcode
  kNone,
  kFixed,   // `size` bytes
  kLength,  // a little-endian length of `size` bytes, then that many bytes
  kLines,   // `size` newline-terminated lines
};

struct Opcode {
  Argument argument = Argument::kUnknown;
  uint8_t size = 0;
};

struct OpcodeTable {
  Opcode at[256];
  OpcodeTable() {
    for (unsigned char c : std::string("(.0122N\x88\x89}])\x8f"
                                       "aedlt\x85\x86\x87suRbQ\x81\x92\x93\x90\x91o\x94\x97\x98")) {
      at[c] = {Argument::kNone, 0};
    }
    const struct {
      unsigned char code;
      Argument argument;
      uint8_t size;
    } with_arguments[] = {
        {0x80, Argument::kFixed, 1},  {'J', Argument::kFixed, 4},   {'K', Argument::kFixed, 1},
        {'M', Argument::kFixed, 2},   {'G', Argument::kFixed, 8},   {'q', Argument::kFixed, 1},
        {'r', Argument::kFixed, 4},   {'h', Argument::kFixed, 1},   {'j', Argument::kFixed, 4},
        {0x82, Argument::kFixed, 1},  {0x83, Argument::kFixed, 2},  {0x84, Argument::kFixed, 4},
        {0x95, Argument::kFixed, 8},  {'X', Argument::kLength, 4},  {0x8c, Argument::kLength, 1},
        {0x8d, Argument::kLength, 8}, {'B', Argument::kLength, 4},  {'C', Argument::kLength, 1},
        {0x8e, Argument::kLength, 8}, {'T', Argument::kLength, 4},  {'U', Argument::kLength, 1},
        {0x8a, Argument::kLength, 1}, {0x8b, Argument::kLength, 4}, {0x96, Argument::kLength, 8},
        {'c', Argument::kLines, 2},   {'i', Argument::kLines, 2},   {'I', Argument::kLines, 1},
        {'L', Argument::kLines, 1},   {'S', Argument::kLines, 1},   {'V', Argument::kLines, 1},
        {'F', Argument::kLines, 1},   {'p', Argument::kLines, 1},   {'g', Argument::kLines, 1},
        {'P', Argument::kLines, 1},
    };
    for (const auto& o : with_arguments) at[o.code] = {o.argument, o.size};
  }
};

}  // namespace

void check_pickle_structure(const char* data, size_t size, const std::string& path) {
  static const OpcodeTable table;
  auto fail = [&](size_t offset, const std::string& what) {
    throw IoError(str_cat("checkpoint ", path, ": its pickle is damaged at byte ", offset, ": ", what));
  };
  size_t at = 0;
  while (at < size) {
    const size_t start = at;
    const auto code = static_cast<unsigned char>(data[at++]);
    const Opcode op = table.at[code];
    const size_t left = size - at;
    switch (op.argument) {
      case Argument::kUnknown:
        fail(start,
             str_cat("byte 0x", "0123456789abcdef"[code >> 4], "0123456789abcdef"[code & 15], " is no pickle opcode"));
        break;
      case Argument::kNone:
        if (code == '.') return;  // STOP: what follows is not read
        break;
      case Argument::kFixed:
        if (op.size > left) fail(start, "its argument runs past the end");
        if (code == 'r' || code == 'j') {  // LONG_BINPUT, LONG_BINGET: a memo index
          // The unpickler grows its memo to the index a PUT names (16 bytes an entry): a pickler
          // numbers its memo from 0, one PUT at a time, so no index reaches the pickle's size.
          uint32_t index = 0;
          std::memcpy(&index, data + at, sizeof(index));
          if (index >= size) fail(start, str_cat("it names memo entry ", index, " in a pickle of ", size, " bytes"));
        }
        at += op.size;
        break;
      case Argument::kLength: {
        if (op.size > left) fail(start, "its length runs past the end");
        uint64_t length = 0;
        std::memcpy(&length, data + at, op.size);  // little-endian, as the protocol and x86/ARM are
        at += op.size;
        if (length > size - at) {
          fail(start, str_cat("it claims ", length, " bytes, ", size - at, " are left"));
        }
        at += static_cast<size_t>(length);
        break;
      }
      case Argument::kLines:
        for (int line = 0; line < op.size; ++line) {
          const void* newline = std::memchr(data + at, '\n', size - at);
          if (!newline) fail(start, "its argument has no end of line");
          const size_t end = static_cast<size_t>(static_cast<const char*>(newline) - data);
          if (code == 'p' || code == 'g') {  // PUT, GET: a memo index in decimal, bounded as above
            const std::string text(data + at, end - at);
            uint64_t index = 0;  // saturates at `size`
            for (char c : text) {
              if (c < '0' || c > '9') fail(start, "its memo index is not a number");
              index = std::min<uint64_t>(size, index * 10 + static_cast<uint64_t>(c - '0'));
            }
            if (index >= size) fail(start, str_cat("it names memo entry ", text, " in a pickle of ", size, " bytes"));
          }
          at = end + 1;
        }
        break;
    }
  }
  fail(size, "it ends before its STOP opcode");
}

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

}  // namespace ringtorch
