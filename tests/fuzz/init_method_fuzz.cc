// Fuzz target: init-method URLs (rendezvous/init_method.h). Any text must parse or throw a
// ringtorch::Error; a parsed URL's printable text must never hold its password.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <ringtorch/error.h>

#include "rendezvous/init_method.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string url(reinterpret_cast<const char*>(data), size);
  try {
    const ringtorch::InitMethod parsed = ringtorch::parse_init_method(url);
    // The masked text is what every message prints: the password must not be in it.
    if (!parsed.password.empty() && parsed.text.find(":" + parsed.password + "@") != std::string::npos) std::abort();
  } catch (const ringtorch::Error&) {
  }
  return 0;
}
