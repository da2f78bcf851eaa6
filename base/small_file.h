// Reads a small input file whole: a configuration, a password file. Only a regular file is read
// (a device, a FIFO or a directory named by mistake would block or mean nothing), and only up to
// a bound, so that a wrong path cannot make a program read without end.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <cstddef>
#include <string>

namespace ringtorch {

// The file's bytes. Throws IoError when it cannot be opened or read, InvalidArgumentError when
// it is not a regular file or is larger than `max_bytes`; each message starts with `what`
// ("--config", "--rdzv_conf password_file") and names the file and the bound.
std::string read_small_file(const std::string& path, size_t max_bytes, const std::string& what);

}  // namespace ringtorch
