// Checks of a checkpoint's pickle around LibTorch's unpickler, for what LibTorch 1.13 does not
// check itself (each found by tests/fuzz/checkpoint_fuzz):
//  - before: every opcode is one the pickle protocol defines, and every length-prefixed argument
//    (a string's, a bytes object's) fits in what is left, and no memo index reaches the pickle's
//    size. The unpickler allocates and zero-fills a string of whatever length the pickle claims
//    before it finds the data shorter (a damaged checkpoint of a few KB made it touch 4 GiB),
//    and grows its memo to whatever index a PUT names (10 GB asked for).
//  - before, too: no opcode takes more items than the stack holds above its last MARK, every
//    opcode that pops to a MARK has one, and DICT and SETITEMS get whole key-value pairs. The
//    unpickler pops without looking (a TUPLE3 on a stack of one made it free a pointer it never
//    allocated: glibc aborted the process).
//  - before, too: no entry of the zip archive claims more bytes than the file holds. The reader
//    allocates an entry's claimed size before it extracts it (4 GiB asked for); checkpoints are
//    stored uncompressed, by LibTorch and by Python's torch.save alike.
//  - after: a tensor's sizes, strides and offset stay inside its storage. The unpickler builds a
//    tensor from the file's numbers as they are (Python's torch.load refuses such a tensor), and
//    a read of it ran past the storage (a SEGV in the CPU generator's set_state).
//
// Thread-safety: a pure function.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <string>

namespace ringtorch {

// Throws IoError naming `path` and the offset of the first opcode that is unknown, or whose
// argument runs past the end, or that takes items the stack does not hold, or when the pickle
// ends before its STOP.
void check_pickle_structure(const char* data, size_t size, const std::string& path);

// Throws IoError naming `path` when the zip archive's central directory cannot be read or an
// entry claims more (uncompressed) bytes than the archive holds.
void check_zip_entry_sizes(const char* data, size_t size, const std::string& path);

// Throws IoError "<what> is not a dense tensor within its storage (...)" otherwise.
void check_tensor_within_storage(const at::Tensor& tensor, const std::string& what);

}  // namespace ringtorch
