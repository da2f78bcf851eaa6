// Checks of a checkpoint archive around LibTorch's zip reader and the tensors read from it, for
// what LibTorch 1.13 does not check itself (each found by tests/fuzz/checkpoint_fuzz):
//  - before: no entry of the zip archive claims more bytes than the file holds. The reader
//    allocates an entry's claimed size before it extracts it (4 GiB asked for); checkpoints are
//    stored uncompressed, by LibTorch and by Python's torch.save alike.
//  - after: a tensor's sizes, strides and offset stay inside its storage (Python's torch.load
//    refuses such a tensor; a read of one ran past the storage: a SEGV in the CPU generator's
//    set_state). The pickle itself is read by pickle_reader.h, which checks as it reads.
//
// Thread-safety: a pure function.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <string>

namespace ringtorch {

// Throws IoError naming `path` when the zip archive's central directory cannot be read or an
// entry claims more (uncompressed) bytes than the archive holds.
void check_zip_entry_sizes(const char* data, size_t size, const std::string& path);

// Throws IoError "<what> is not a dense tensor within its storage (...)" otherwise.
void check_tensor_within_storage(const at::Tensor& tensor, const std::string& what);

}  // namespace ringtorch
