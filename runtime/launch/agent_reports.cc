// What ringrun reports about its workers beyond their exit: the flight recorders' summary when
// a worker fails, and the merged timeline at the end (docs/observability.md).
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include <ringtorch/error.h>

#include "base/log.h"
#include "runtime/launch/launch_agent.h"
#include "runtime/launch/timeline_parts.h"
#include "runtime/trace/flight_analysis.h"
#include "runtime/trace/flight_recorder.h"

namespace ringtorch {

void LaunchAgent::remove_stale_reports() const {
  for (int l = 0; l < config_.nproc_per_node; ++l) {
    const int rank = rank_of(l);
    ::unlink(flight_recorder_file(placement_.flight_recorder_dir, rank).c_str());
    if (!placement_.timeline.empty()) ::unlink(timeline_part(placement_.timeline, rank).c_str());
  }
}

std::vector<int> LaunchAgent::request_flight_dumps() {
  std::vector<int> asked, skipped;
  for (int l = 0; l < static_cast<int>(workers_.size()); ++l) {
    if (!workers_[l].poll().has_value() && process_catches_signal(workers_[l].pid(), SIGUSR1)) {
      ::kill(workers_[l].pid(), SIGUSR1);  // the worker only: its own children may not expect it
      asked.push_back(rank_of(l));
    } else if (!workers_[l].poll().has_value()) {
      skipped.push_back(rank_of(l));
    }
  }
  if (!skipped.empty()) {
    std::string list;
    for (int r : skipped) list += (list.empty() ? "" : ", ") + std::to_string(r);
    log(str_cat("flight recorder: not asked: rank ", list,
                " (no SIGUSR1 handler yet: not in a process group, RINGTORCH_FLIGHT_RECORDER_SIZE=0, or not a "
                "ringtorch program; SIGUSR1 would end it)"));
  }
  return asked;
}

void LaunchAgent::report_flight_recorder() {
  // Every worker still running that can take SIGUSR1 writes its file now, before it is stopped;
  // one that failed in a collective has written its own already (with its reason).
  const int64_t asked_at = flight_recorder_now_us();
  const std::vector<int> asked = workers_recover_in_process() ? std::vector<int>{} : request_flight_dumps();
  auto fresh = [&](int rank) {
    std::ifstream in(flight_recorder_file(placement_.flight_recorder_dir, rank));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find("\"dumped_us\":");
    return at != std::string::npos && std::strtoll(text.c_str() + at + 12, nullptr, 10) >= asked_at;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  auto all_written = [&] {
    for (int rank : asked) {
      if (!fresh(rank)) return false;
    }
    return true;
  };
  while (!all_written() && std::chrono::steady_clock::now() < deadline) output_.pump(std::chrono::milliseconds(20));
  try {
    const FlightAnalysis analysis = analyze_flight_dumps(placement_.flight_recorder_dir, generation_started_us_);
    for (const auto& line : analysis.summary) log("flight recorder: " + line);
    log(str_cat("flight recorder: ", analysis.files.size(), " file", analysis.files.size() == 1 ? "" : "s", " in ",
                placement_.flight_recorder_dir, " (ringtrace ", placement_.flight_recorder_dir,
                " --json for all of it)", several_nodes() ? "; other nodes' ranks write theirs on their nodes" : ""));
  } catch (const std::exception& e) {
    // Nothing recorded (no worker is a ringtorch program, or none got that far): not worth a
    // line after a failure, whose cause must stay in sight.
    log_line(LogLevel::kDebug, str_cat("flight recorder: nothing to report (", e.what(), ")"), "ringrun");
  }
}

void LaunchAgent::merge_timeline() const {
  if (placement_.timeline.empty()) return;
  std::vector<int> ranks;
  for (int l = 0; l < config_.nproc_per_node; ++l) ranks.push_back(rank_of(l));
  const std::string out = placement_.node_rank == 0
                              ? placement_.timeline
                              : str_cat(placement_.timeline, ".node", placement_.node_rank, ".json");
  log(merge_timeline_parts(placement_.timeline, ranks, out));
}

}  // namespace ringtorch
