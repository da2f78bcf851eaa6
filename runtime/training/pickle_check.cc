#include "runtime/training/pickle_check.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <ringtorch/error.h>
#include <ringtorch/str_cat.h>

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

// What an opcode does to the unpickler's stack: pops items (after popping everything down to the
// last MARK, for the opcodes that take a MARK), then pushes items.
enum class Mark : uint8_t {
  kNone,
  kPushes,  // MARK
  kPops,    // LIST, TUPLE, DICT, APPENDS, SETITEMS, ...: everything above the last MARK, and the MARK
};

struct Opcode {
  Argument argument = Argument::kUnknown;
  uint8_t size = 0;
  Mark mark = Mark::kNone;
  uint8_t pops = 0;
  uint8_t pushes = 0;
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
    // Stack effects (pickletools' stack_before and stack_after). Every opcode not named here
    // pushes one item (a constant, a string, a memo entry, an empty container, a global).
    for (auto& o : at) o.pushes = 1;
    const struct {
      unsigned char code;
      Mark mark;
      uint8_t pops, pushes;
    } effects[] = {
        {'(', Mark::kPushes, 0, 0},  // MARK
        {'.', Mark::kNone, 1, 0},    // STOP: the result
        {'0', Mark::kNone, 1, 0},    // POP
        {'1', Mark::kPops, 0, 0},    // POP_MARK
        {'2', Mark::kNone, 1, 2},    // DUP
        {'Q', Mark::kNone, 1, 1},    // BINPERSID
        {'R', Mark::kNone, 2, 1},    // REDUCE: callable, arguments
        {'a', Mark::kNone, 2, 1},    // APPEND: list, item
        {'b', Mark::kNone, 2, 1},    // BUILD: object, state
        {'d', Mark::kPops, 0, 1},    // DICT
        {'e', Mark::kPops, 1, 1},    // APPENDS: the list below the MARK stays
        {'i', Mark::kPops, 0, 1},    // INST
        {'l', Mark::kPops, 0, 1},    // LIST
        {'o', Mark::kPops, 0, 1},    // OBJ
        {'p', Mark::kNone, 1, 1},    // PUT: memoizes the top, which stays
        {'q', Mark::kNone, 1, 1},    // BINPUT
        {'r', Mark::kNone, 1, 1},    // LONG_BINPUT
        {'s', Mark::kNone, 3, 1},    // SETITEM: dict, key, value
        {'t', Mark::kPops, 0, 1},    // TUPLE
        {'u', Mark::kPops, 1, 1},    // SETITEMS: the dict below the MARK stays
        {0x80, Mark::kNone, 0, 0},   // PROTO
        {0x81, Mark::kNone, 2, 1},   // NEWOBJ: class, arguments
        {0x85, Mark::kNone, 1, 1},   // TUPLE1
        {0x86, Mark::kNone, 2, 1},   // TUPLE2
        {0x87, Mark::kNone, 3, 1},   // TUPLE3
        {0x90, Mark::kPops, 1, 1},   // ADDITEMS: the set below the MARK stays
        {0x91, Mark::kPops, 0, 1},   // FROZENSET
        {0x92, Mark::kNone, 3, 1},   // NEWOBJ_EX
        {0x93, Mark::kNone, 2, 1},   // STACK_GLOBAL: module, name
        {0x94, Mark::kNone, 1, 1},   // MEMOIZE
        {0x95, Mark::kNone, 0, 0},   // FRAME
        {0x98, Mark::kNone, 1, 1},   // READONLY_BUFFER
    };
    for (const auto& e : effects) {
      at[e.code].mark = e.mark;
      at[e.code].pops = e.pops;
      at[e.code].pushes = e.pushes;
    }
  }
};

// The unpickler's stack, by depth only: LibTorch 1.13 pops without looking (TUPLE3 on a stack of
// one freed a pointer it never allocated: the checkpoint fuzzer's input), takes the last MARK
// when there is none, and reads a DICT's or SETITEMS' key-value pairs past the end of an odd
// count. Python's unpickler refuses all three; so does this.
class StackDepth {
 public:
  // Returns what is wrong with applying `op`, or an empty string.
  std::string apply(unsigned char code, const Opcode& op) {
    if (op.mark == Mark::kPushes) {
      marks_.push_back(depth_);
      return {};
    }
    if (op.mark == Mark::kPops) {
      if (marks_.empty()) return "it needs a MARK and there is none";
      const size_t above = depth_ - marks_.back();
      if ((code == 'd' || code == 'u') && above % 2 != 0) {
        return str_cat("it pairs keys with values and there are ", above, " items");
      }
      depth_ = marks_.back();
      marks_.pop_back();
    }
    // Items below the last MARK belong to an unfinished container: not this opcode's to take.
    const size_t available = depth_ - (marks_.empty() ? 0 : marks_.back());
    if (op.pops > available) {
      return str_cat("it takes ", int{op.pops}, op.pops == 1 ? " item" : " items", " from a stack of ", available);
    }
    depth_ = depth_ - op.pops + op.pushes;
    return {};
  }

 private:
  size_t depth_ = 0;
  std::vector<size_t> marks_;  // the depth at each MARK
};

}  // namespace

void check_pickle_structure(const char* data, size_t size, const std::string& path) {
  static const OpcodeTable table;
  auto fail = [&](size_t offset, const std::string& what) {
    throw IoError(str_cat("checkpoint ", path, ": its pickle is damaged at byte ", offset, ": ", what));
  };
  StackDepth stack;
  size_t at = 0;
  while (at < size) {
    const size_t start = at;
    const auto code = static_cast<unsigned char>(data[at++]);
    const Opcode op = table.at[code];
    const size_t left = size - at;
    if (op.argument != Argument::kUnknown) {
      const std::string wrong = stack.apply(code, op);
      if (!wrong.empty()) fail(start, wrong);
    }
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
