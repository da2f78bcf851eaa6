// What ringrun reports about its workers beyond their exit: the flight recorders' summary when
// a worker fails, and the merged timeline at the end (docs/observability.md).
#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include "base/error.h"
#include "runtime/launch/launch_agent.h"
#include "runtime/launch/timeline_parts.h"
#include "runtime/trace/flight_analysis.h"

namespace ringtorch {
namespace {

std::string flight_file(const std::string& dir, int rank) { return str_cat(dir, "/rank", rank, ".json"); }

}  // namespace

void LaunchAgent::remove_flight_files() const {
  for (int l = 0; l < config_.nproc_per_node; ++l) {
    ::unlink(flight_file(placement_.flight_recorder_dir, config_.node_rank * config_.nproc_per_node + l).c_str());
  }
}

void LaunchAgent::report_flight_recorder() {
  // A worker that failed in a collective has written its file already (and its reason); the
  // others are asked for theirs now, before they are stopped.
  std::vector<std::string> awaited;
  for (int l = 0; l < static_cast<int>(workers_.size()); ++l) {
    const std::string file =
        flight_file(placement_.flight_recorder_dir, config_.node_rank * config_.nproc_per_node + l);
    if (workers_[l].running() && !std::filesystem::exists(file)) {
      workers_[l].signal(SIGUSR1);
      awaited.push_back(file);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  auto all_written = [&] {
    for (const auto& f : awaited) {
      if (!std::filesystem::exists(f)) return false;
    }
    return true;
  };
  while (!all_written() && std::chrono::steady_clock::now() < deadline) output_.pump(std::chrono::milliseconds(20));
  try {
    const FlightAnalysis analysis = analyze_flight_dumps(placement_.flight_recorder_dir);
    for (const auto& line : analysis.summary) log("flight recorder: " + line);
    log(str_cat("flight recorder: ", analysis.files.size(), " file", analysis.files.size() == 1 ? "" : "s", " in ",
                placement_.flight_recorder_dir, " (ringtrace ", placement_.flight_recorder_dir,
                " --json for all of it)"));
  } catch (const std::exception& e) {
    log(str_cat("flight recorder: nothing to report (", e.what(), ")"));
  }
}

void LaunchAgent::merge_timeline() const {
  if (placement_.timeline.empty()) return;
  std::vector<int> ranks;
  for (int l = 0; l < config_.nproc_per_node; ++l) ranks.push_back(config_.node_rank * config_.nproc_per_node + l);
  const std::string out =
      config_.node_rank == 0 ? placement_.timeline : str_cat(placement_.timeline, ".node", config_.node_rank, ".json");
  log(merge_timeline_parts(placement_.timeline, ranks, out));
}

}  // namespace ringtorch
