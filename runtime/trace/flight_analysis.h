// Reads every rank's flight-recorder file (flight_recorder.h) from one directory and says where
// each rank stopped: which ranks failed or wait in which operation, which ranks finished an
// operation the others are still in and then did nothing, and which ranks wrote no file at all.
// `ringtrace DIR` prints it; `ringtrace DIR --json` prints the structure below.
//
// Example:
//   ringtorch::FlightAnalysis analysis = ringtorch::analyze_flight_dumps("/tmp/ringtorch-flight-recorder/run1");
//   for (const auto& line : analysis.summary) std::printf("%s\n", line.c_str());
//
// Thread-safety: plain functions over files and values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringtorch {

struct FlightAnalysis {
  // Where one rank of one group stands in its dump.
  struct RankState {
    int rank = 0;  // in the group
    bool dumped = false;
    // "failed" (its oldest unfinished operation failed), "in_operation" (started or queued,
    // not ended), "idle" (everything it started had ended), "missing" (no file).
    std::string state;
    int64_t last_completed = -1;  // sequence number; -1: none kept
    // The first operation after the newest completed one that did not complete (failed, started
    // or queued); sequence -1: none. (A failure the program caught and went on from is older
    // than a completed operation: it is counted in earlier_failures, not reported as current.)
    int64_t sequence = -1;
    int earlier_failures = 0;
    std::string op, detail, path, label, error;
    std::string reason;  // why the file was written ("SIGUSR1", "PeerLostError in allreduce #3 ...")
  };
  struct Group {
    std::string name;
    int size = 0;
    std::vector<RankState> ranks;  // every rank 0..size-1
    std::vector<std::string> findings;
  };
  std::string directory;
  std::vector<std::string> files;
  std::vector<Group> groups;         // the whole group first, then subgroups by name
  std::vector<std::string> summary;  // the findings of every group, one line each

  std::string to_json() const;
  std::string to_text() const;
};

// Throws IoError when `directory` holds no readable flight-recorder file, or names a file that
// is not one. Files written before `since_us` (wall clock, µs) are left out: a launcher reads
// only its current round's.
FlightAnalysis analyze_flight_dumps(const std::string& directory, int64_t since_us = 0);

}  // namespace ringtorch
