// Pictures of a training run: ringtrain's per-epoch metrics (the --metrics file's lines) drawn
// with PLplot (Debian's libplplot-dev) as one SVG of three panels: the training loss, the test
// accuracy, and each rank's samples/s, per epoch. ringtrain --plot FILE.svg draws it at the end
// of a run; `ringtrace plot METRICS OUT.svg` draws it from a metrics file afterwards.
//
// Thread-safety: PLplot keeps global state; draw from one thread at a time (plot_run locks).
#pragma once

#include <string>
#include <vector>

namespace ringtorch {

struct EpochMetrics {
  int epoch = 0;
  double loss = 0, test_accuracy = 0, seconds = 0, samples_per_s = 0;
  std::vector<double> rank_samples_per_s;  // per rank; empty when the line has no "ranks"
};

// The last run in a metrics file (a file that several runs appended to starts again at a lower
// epoch). Throws IoError naming the file and line that cannot be read.
std::vector<EpochMetrics> read_metrics_file(const std::string& path);

// True when this build can draw (it was built with PLplot).
bool can_plot();
// Writes `path` (.svg). Throws InvalidArgumentError for another extension or no epochs, IoError
// when PLplot cannot write, and InvalidArgumentError when the build has no PLplot.
void plot_run(const std::vector<EpochMetrics>& epochs, const std::string& path, const std::string& title);

}  // namespace ringtorch
