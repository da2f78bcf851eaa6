// A picture of a timeline (a Chrome trace as ringtorch writes it, timeline.h): one row per rank
// and thread, each span a bar coloured by its name, nested spans (a step's forward, backward and
// optimizer) below their parent, over a window of the run. Drawn with PLplot as SVG, for docs
// and reports where a trace viewer is not at hand; Perfetto shows the same file interactively.
//
// Thread-safety: PLplot keeps global state; one drawing at a time (locked inside).
#pragma once

#include <string>

namespace ringtorch {

struct TimelineWindow {
  // Where the window starts: at the start of this training step of rank 0 (counted from 0)...
  int from_step = 10;
  // ...and how long it is, in milliseconds.
  double milliseconds = 20;
};

// Reads `trace_path` and writes `svg_path`. Throws IoError for a file that is not a trace,
// InvalidArgumentError for an empty window or a build without PLplot.
void plot_timeline(const std::string& trace_path, const std::string& svg_path, const TimelineWindow& window);

}  // namespace ringtorch
