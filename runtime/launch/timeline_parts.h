// Timelines of several processes (runtime/trace/timeline.h) made one: a launcher (ringrun,
// spawn()) gives each worker its own part file through RINGTORCH_TIMELINE and merges the parts
// when the workers have ended.
//
// Thread-safety: plain functions over files.
#pragma once

#include <string>
#include <vector>

namespace ringtorch {

// Where rank `rank` writes its part of `timeline` ("run.json" -> "run.json.rank3.json").
std::string timeline_part(const std::string& timeline, int rank);

// Merges the parts of `ranks` that exist into `out` and removes them; returns what to log:
// "timeline: OUT (2 of 2 ranks, N events); open it in ...", or why nothing was merged (the
// parts are kept when the merge fails).
std::string merge_timeline_parts(const std::string& timeline, const std::vector<int>& ranks, const std::string& out);

}  // namespace ringtorch
