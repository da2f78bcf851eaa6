// A POSIX shared-memory segment (shm_open + mmap) that several processes of one host map.
// The creator reserves the memory up front (posix_fallocate), so a /dev/shm too small for it
// fails here, at set-up, instead of with SIGBUS in the middle of a collective.
//
// Lifetime: the group's first local rank unlinks the name once every rank has mapped it or
// given up (host_plan.cc), so a crashed run leaves nothing behind; the mapping lives until the
// last holder unmaps it. unlink() is there for a caller that owns the name alone.
//
// Thread-safety: the object is not shared between threads; the memory it maps is, and its
// users synchronise through atomics in it.
#pragma once

#include <cstddef>
#include <string>

namespace ringtorch {

class SharedSegment {
 public:
  // Removes a leftover of the same name first. Throws IoError naming the segment and errno.
  static SharedSegment create(const std::string& name, size_t bytes);
  // Throws IoError when it does not exist or is smaller than `bytes`.
  static SharedSegment open(const std::string& name, size_t bytes);

  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  ~SharedSegment();  // unmaps

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  // Removes the name (idempotent; ENOENT is fine: another process did it).
  void unlink();

 private:
  SharedSegment(std::string name, void* data, size_t size) : name_(std::move(name)), data_(data), size_(size) {}
  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// "/ringtorch-<text with anything but [A-Za-z0-9._-] replaced by '_'>", at most NAME_MAX.
std::string shared_segment_name(const std::string& text);

// Removes the segments groups of run `run_id` may have left in /dev/shm (names
// "ringtorch-<run id>-<restart>-<round>-..."): only a process killed during a group's set-up
// leaves one, since names are unlinked once every rank has mapped them. The launcher calls it
// after its workers have exited. Returns how many it removed.
int remove_leftover_segments(const std::string& run_id);

}  // namespace ringtorch
