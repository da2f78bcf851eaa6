// Fuzz target: ringtrain's job config (apps/trainer/job_config.h). Any text must apply or throw
// a ringtorch::Error.
#include <cstddef>
#include <cstdint>
#include <string>

#include <ringtorch/error.h>

#include "apps/trainer/job_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringtorch::TrainerOptions options;
  ringtorch::RendezvousOptions rendezvous_options;
  try {
    ringtorch::apply_job_config(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json", options,
                                rendezvous_options);
  } catch (const ringtorch::Error&) {
  }
  return 0;
}
