// ringtrace: reads what a distributed job left behind. All logic is in runtime/trace/ and
// apps/plot/; docs/observability.md documents every form.
//
//   ringtrace DIR [--json]            where each rank stopped, from the flight-recorder files in DIR
//   ringtrace merge OUT IN...         Chrome traces (timelines) of several ranks -> one file
//   ringtrace plot METRICS OUT.svg    ringtrain's --metrics file -> loss, accuracy, samples/s per rank
//   ringtrace draw TRACE OUT.svg [--from-step N] [--ms M]   a picture of a timeline's window
#include <cstdio>
#include <string>
#include <vector>

#include "apps/main_guard.h"
#include "apps/plot/run_plot.h"
#include "apps/plot/timeline_plot.h"
#include "base/atomic_file.h"
#include "base/error.h"
#include "base/parse.h"
#include "runtime/trace/flight_analysis.h"
#include "runtime/trace/timeline.h"

namespace {

constexpr char kUsage[] =
    "usage: ringtrace DIR [--json]           where each rank stopped (flight-recorder files in DIR)\n"
    "       ringtrace merge OUT IN...        merge timelines (Chrome traces) into OUT\n"
    "       ringtrace plot METRICS OUT.svg   draw a ringtrain --metrics file\n"
    "       ringtrace draw TRACE OUT.svg [--from-step N (default 10)] [--ms M (default 20)]\n"
    "                                        draw M ms of a timeline from rank 0's step N\n";

int run(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "merge") {
    if (args.size() < 3)
      throw ringtorch::InvalidArgumentError(std::string("merge needs OUT and at least one IN\n") + kUsage);
    size_t events = 0;
    const std::string merged = ringtorch::merge_chrome_traces({args.begin() + 2, args.end()}, &events);
    ringtorch::write_file_atomically(args[1], merged, "ringtrace merge");
    std::printf("%s: %zu events from %zu files\n", args[1].c_str(), events, args.size() - 2);
    return 0;
  }
  if (args[0] == "plot") {
    if (args.size() != 3)
      throw ringtorch::InvalidArgumentError(std::string("plot needs METRICS and OUT.svg\n") + kUsage);
    const auto epochs = ringtorch::read_metrics_file(args[1]);
    ringtorch::plot_run(epochs, args[2], "ringtrain");
    std::printf("%s: %zu epochs\n", args[2].c_str(), epochs.size());
    return 0;
  }
  if (args[0] == "draw") {
    if (args.size() < 3) throw ringtorch::InvalidArgumentError(std::string("draw needs TRACE and OUT.svg\n") + kUsage);
    ringtorch::TimelineWindow window;
    for (size_t i = 3; i < args.size(); i += 2) {
      if (i + 1 >= args.size()) throw ringtorch::InvalidArgumentError(args[i] + " needs a value\n" + kUsage);
      if (args[i] == "--from-step") {
        window.from_step = static_cast<int>(ringtorch::parse_int_in_range(args[i + 1], 0, 1 << 30, "--from-step"));
      } else if (args[i] == "--ms") {
        window.milliseconds = ringtorch::parse_number_in_range(args[i + 1], 0.001, 1e9, "--ms");
      } else {
        throw ringtorch::InvalidArgumentError("unexpected argument '" + args[i] + "'\n" + kUsage);
      }
    }
    ringtorch::plot_timeline(args[1], args[2], window);
    std::printf("%s: %.3g ms from rank 0's step %d\n", args[2].c_str(), window.milliseconds, window.from_step);
    return 0;
  }
  bool json = false;
  std::string directory;
  for (const auto& a : args) {
    if (a == "--json") {
      json = true;
    } else if (directory.empty() && a.rfind("--", 0) != 0) {
      directory = a;
    } else {
      throw ringtorch::InvalidArgumentError("unexpected argument '" + a + "'\n" + kUsage);
    }
  }
  if (directory.empty()) throw ringtorch::InvalidArgumentError(std::string("give a directory\n") + kUsage);
  const ringtorch::FlightAnalysis analysis = ringtorch::analyze_flight_dumps(directory);
  std::fputs(json ? (analysis.to_json() + "\n").c_str() : analysis.to_text().c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ringtorch::Timeline::release_environment_file();  // RINGTORCH_TIMELINE may name the file read here
  const std::vector<std::string> args(argv + 1, argv + argc);
  return ringtorch::run_reporting_errors("ringtrace", [&] { return run(args); });
}
