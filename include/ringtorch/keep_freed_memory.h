// keep_freed_memory: freed memory stays in the process. LibTorch's CPU tensors come from
// malloc, and glibc's defaults hand large blocks back to the kernel as soon as they are freed:
// blocks above the mmap threshold (128 KiB at first, then the largest block freed, up to 32 MiB)
// get a mapping of their own, unmapped on free, and the top of the heap is trimmed once more
// than twice that threshold is free. The next step's tensors of the same sizes then fault their
// pages in again one by one (docs/training.md, "Memory the process keeps", has the figures). All
// three settings go together: an explicit trim or mmap threshold alone turns glibc's adaptive
// threshold off.
//
// The settings: blocks up to 32 MiB (glibc's largest mmap threshold) come from the heap, the heap
// is trimmed only when 1 GiB at its top is free, and it grows by 64 MiB beyond what a request
// needs. The cost is memory: each malloc arena (the main one, and one per thread that allocates)
// stays near its peak size plus that padding instead of shrinking when tensors are freed.
//
// Left alone where the user chose: GLIBC_TUNABLES naming any glibc.malloc setting, one of glibc's
// MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_, MALLOC_TOP_PAD_, MALLOC_MMAP_MAX_,
// MALLOC_ARENA_MAX, or RINGTORCH_KEEP_FREED_MEMORY=0.
//
// Example:
//   const bool kept = ringtorch::keep_freed_memory();  // in main(), before training
//   std::printf("malloc keeps freed memory: %s\n", kept ? "yes" : "no (the environment chose)");
//
// Thread-safety: call once, from the program's main thread, while no other thread allocates
// (glibc documents mallopt as MT-Unsafe: it changes settings other threads read unlocked).
// ringtrain calls it right after creating its process group, whose threads then wait on their
// sockets (called at the top of main() instead, the same settings kept fewer pages:
// docs/training.md). The library never calls it on its own (a program's choice,
// docs/ARCHITECTURE.md).
#pragma once

namespace ringtorch {

// Applies the settings above unless the environment says otherwise; returns whether it applied
// all three (false also when glibc refused one, which glibc 2.36 does not for these values).
bool keep_freed_memory();

}  // namespace ringtorch
