// A process-wide pool of page-locked (pinned) host buffers for staging CUDA tensors through host
// memory: copies from pinned memory run at the bus's speed and can be asynchronous, and
// cudaHostAlloc is far too slow to call per collective. Freed blocks are kept by size class
// (powers of two from 1 MiB) and handed out again; nothing is returned to the system until
// release_cached().
//
// Thread-safety: every member may be called from any thread. Ownership: a Block owns its
// buffer until it is destroyed, which gives the buffer back to the pool it came from (the pool
// must outlive its blocks; process_pool() is never destroyed).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>

namespace ringtorch {
namespace cuda {

class PinnedPool {
 public:
  class Block {
   public:
    Block() = default;
    Block(Block&& other) noexcept;
    Block& operator=(Block&& other) noexcept;
    Block(const Block&) = delete;
    Block& operator=(const Block&) = delete;
    ~Block();

    void* data() const { return data_; }
    size_t capacity() const { return capacity_; }

   private:
    friend class PinnedPool;
    Block(PinnedPool* pool, void* data, size_t capacity) : pool_(pool), data_(data), capacity_(capacity) {}
    PinnedPool* pool_ = nullptr;
    void* data_ = nullptr;
    size_t capacity_ = 0;
  };

  PinnedPool() = default;
  ~PinnedPool();  // frees the cached buffers (blocks still out must be gone by then)
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // The pool ProcessGroup stages through. Intentionally never destroyed: CUDA may already be torn
  // down when static destructors run.
  static PinnedPool& process_pool();

  // A buffer of at least `bytes` (a cached one of the same size class, else a new one). Throws
  // IoError naming cudaHostAlloc and the size when the system refuses.
  Block acquire(size_t bytes);

  size_t cached_bytes() const;  // pinned bytes held for reuse, not in any block
  void release_cached();        // cudaFreeHost of every cached buffer

  static size_t size_class(size_t bytes);  // what acquire(bytes) allocates

 private:
  void give_back(void* data, size_t capacity) noexcept;

  mutable std::mutex mutex_;
  std::multimap<size_t, void*> free_;  // capacity -> buffer; guarded by mutex_
};

}  // namespace cuda
}  // namespace ringtorch
