// Receive memory kept between calls: fresh pages (zeroed by the kernel, faulted in one by one)
// can cost more than the transfer itself. Grows, never shrinks; not zeroed.
//
// Thread-safety: none; its owner runs one operation at a time (the process group's order).
#pragma once

#include <cstddef>
#include <memory>

namespace ringtorch {

class ScratchBuffer {
 public:
  // At least `bytes` of memory, valid until the next get(); earlier contents are not kept.
  char* get(size_t bytes) {
    if (bytes > capacity_) {
      data_.reset(new char[bytes]);  // uninitialised on purpose: every byte is written before use
      capacity_ = bytes;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<char[]> data_;
  size_t capacity_ = 0;
};

}  // namespace ringtorch
