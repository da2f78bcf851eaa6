#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include <ringtorch/keep_freed_memory.h>

namespace ringtorch {
namespace {

constexpr int kMmapThreshold = 32 << 20;  // glibc's own upper bound for it
constexpr int kTrimThreshold = 1 << 30;
constexpr int kTopPad = 64 << 20;

bool user_chose() {
  const char* off = std::getenv("RINGTORCH_KEEP_FREED_MEMORY");
  if (off != nullptr && std::strcmp(off, "0") == 0) return true;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr) return true;
  for (const char* name : {"MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_",
                           "MALLOC_ARENA_MAX"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

}  // namespace

bool keep_freed_memory() {
  if (user_chose()) return false;
  return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1 &&
         mallopt(M_TOP_PAD, kTopPad) == 1;
}

}  // namespace ringtorch
