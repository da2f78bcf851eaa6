#include "runtime/launch/timeline_parts.h"

#include <unistd.h>

#include <filesystem>

#include <ringtorch/error.h>
#include <ringtorch/timeline.h>

#include "base/atomic_file.h"

namespace ringtorch {

std::string timeline_part(const std::string& timeline, int rank) { return str_cat(timeline, ".rank", rank, ".json"); }

std::string merge_timeline_parts(const std::string& timeline, const std::vector<int>& ranks, const std::string& out) {
  std::vector<std::string> parts;
  for (int rank : ranks) {
    const std::string part = timeline_part(timeline, rank);
    if (std::filesystem::exists(part)) parts.push_back(part);
  }
  if (parts.empty()) return "timeline: no worker wrote its part (a worker writes it when it exits normally)";
  try {
    size_t events = 0;
    write_file_atomically(out, merge_chrome_traces(parts, &events), "timeline");
    for (const auto& part : parts) ::unlink(part.c_str());
    return str_cat("timeline: ", out, " (", parts.size(), " of ", ranks.size(), " ranks, ", events,
                   " events); open it in https://ui.perfetto.dev or chrome://tracing");
  } catch (const std::exception& e) {
    return str_cat("timeline: could not merge the parts (kept): ", e.what());
  }
}

}  // namespace ringtorch
