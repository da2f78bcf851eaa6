// A structural check of a pickle before LibTorch's unpickler reads it: every opcode is one the
// pickle protocol defines, and every length-prefixed argument (a string's, a bytes object's)
// fits in what is left. LibTorch 1.13's unpickler allocates and zero-fills a string of whatever
// length the pickle claims before it finds the data shorter: a damaged checkpoint of a few KB
// made it touch 4 GiB (tests/fuzz/checkpoint_fuzz).
//
// Thread-safety: a pure function.
#pragma once

#include <cstddef>
#include <string>

namespace ringtorch {

// Throws IoError naming `path` and the offset of the first opcode that is unknown, or whose
// argument runs past the end, or when the pickle ends before its STOP.
void check_pickle_structure(const char* data, size_t size, const std::string& path);

}  // namespace ringtorch
