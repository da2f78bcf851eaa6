// A checkpoint's pickle (the data.pkl of a torch.save or torch::pickle_save archive) read into an
// IValue by ringtorch itself, not by LibTorch's unpickler.
//
// Why our own: LibTorch 1.13's unpickler does not read what Python's torch.save writes for
// ordinary dicts (SETITEM for a one-entry dict, APPEND for a one-item list, an OrderedDict
// state_dict, a LONG1 integer shorter than 8 bytes, protocols above 2: "Unknown opcode"), and on
// damaged input it allocated what the file claimed, popped an empty stack and freed a pointer it
// never allocated (tests/fuzz/checkpoint_fuzz). This reader knows protocols 2 to 5 and reads, as
// Python's torch.load(weights_only=True) does, only what a checkpoint holds: None, bools,
// integers (up to 64 bits), floats, strings (bytes become strings), tuples, lists, dicts (keys:
// strings and integers 0 to 2^31-1, as state_dicts and optimizer states have), and tensors
// rebuilt from the archive's storages
// (torch._utils._rebuild_tensor_v2, _rebuild_parameter), plus the OrderedDict a state_dict is
// and LibTorch's restore_type_tag. Any other global, class instances and sets are refused,
// naming them. Every length, memo index and stack access is checked against what the pickle
// holds; containers nest at most 100 deep; a container cannot be changed after it was placed in
// another (no cycles); every tensor lies within its storage.
//
// Thread-safety: a pure function (load_storage is called on the caller's thread).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstddef>
#include <functional>
#include <string>

namespace ringtorch {

// The archive's storage `key` (its record data/<key>) as a flat tensor of `dtype` over the whole
// record; throws IoError when there is no such record or it is not whole elements.
using StorageLoader = std::function<at::Tensor(const std::string& key, at::ScalarType dtype)>;

// Throws IoError "checkpoint <path>: its pickle ... at byte N: ..." for a damaged pickle (an
// unknown opcode, an argument running past the end, an item the stack does not hold, no STOP)
// and for content no checkpoint holds (naming it); what LibTorch itself refuses while making a
// tensor comes as its c10::Error (read_torch_save turns every error into an IoError).
c10::IValue read_pickle(const char* data, size_t size, const StorageLoader& load_storage, const std::string& path);

}  // namespace ringtorch
