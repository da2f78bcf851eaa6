#include "base/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

namespace ringtorch {
namespace {

// spdlog does the levels and the locked, flushed writes; the prefix is ours, because programs
// and tests read these lines in the words they have always had.
// Made once and never destroyed: detached threads (the flight recorder's SIGUSR1 thread) may log
// while the process exits.
spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger>* const instance = new std::shared_ptr<spdlog::logger>([] {
    auto made = std::make_shared<spdlog::logger>("ringtorch", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    made->set_pattern("%v");
    made->flush_on(spdlog::level::trace);  // every line reaches the file at once: a worker may be killed next
    spdlog::level::level_enum level = spdlog::level::info;
    std::string unknown;
    if (const char* text = std::getenv("RINGTORCH_LOG_LEVEL"); text && *text) {
      const std::string name = text;
      if (name == "debug")
        level = spdlog::level::debug;
      else if (name == "warning")
        level = spdlog::level::warn;
      else if (name == "error")
        level = spdlog::level::err;
      else if (name == "off")
        level = spdlog::level::off;
      else if (name != "info")
        unknown = name;
    }
    made->set_level(level);
    if (!unknown.empty()) {
      made->warn("[ringtorch] warning: RINGTORCH_LOG_LEVEL=" + unknown +
                 ": use debug, info, warning, error or off; logging at info");
    }
    return made;
  }());
  return **instance;
}

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarning:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

std::mutex rank_mutex;
std::string& rank_prefix() {  // guarded by rank_mutex; "[rank R/N] " or empty; never destroyed
  static std::string* const prefix = new std::string;
  return *prefix;
}

bool launcher_prefixes_output() {
  const char* text = std::getenv("RINGTORCH_OUTPUT_PREFIXED");
  return text && std::strcmp(text, "1") == 0;
}

}  // namespace

bool log_enabled(LogLevel level) { return logger().should_log(to_spdlog(level)); }

void log_line(LogLevel level, const std::string& message, const std::string& source) {
  if (!log_enabled(level)) return;
  std::string line = "[" + source + "] ";
  {
    std::lock_guard<std::mutex> lock(rank_mutex);
    line += rank_prefix();
  }
  if (level == LogLevel::kWarning) line += "warning: ";
  if (level == LogLevel::kError) line += "error: ";
  line += message;
  logger().log(to_spdlog(level), line);
}

void set_log_rank(int rank, int world_size) {
  static const bool prefixed = launcher_prefixes_output();
  std::lock_guard<std::mutex> lock(rank_mutex);
  rank_prefix() = rank < 0 || prefixed ? "" : "[rank " + std::to_string(rank) + "/" + std::to_string(world_size) + "] ";
}

}  // namespace ringtorch
