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

#include <ringtorch/error.h>
#include <ringtorch/timeline.h>

#include "apps/main_guard.h"
#include "apps/plot/run_plot.h"
#include "apps/plot/timeline_plot.h"
#include "base/atomic_file.h"
#include "base/command_line.h"
#include "base/parse.h"
#include "runtime/trace/flight_analysis.h"

namespace {

constexpr char kUsage[] =
    "usage: ringtrace DIR [--json]           where each rank stopped (flight-recorder files in DIR)\n"
    "       ringtrace merge OUT IN...        merge timelines (Chrome traces) into OUT\n"
    "       ringtrace plot METRICS OUT.svg   draw a ringtrain --metrics file\n"
    "       ringtrace draw TRACE OUT.svg [--from-step N (default 10)] [--ms M (default 20)]\n"
    "                                        draw M ms of a timeline from rank 0's step N\n"
    "Exit status: 0 on success, 1 when a file cannot be read or written, 2 for bad arguments.\n";

struct Request {
  std::vector<std::string> args;  // the form's words: DIR, or merge/plot/draw and their files
  bool json = false;
  ringtorch::TimelineWindow window;
  bool window_given = false;
};

// The form's own shape; InvalidArgumentError (exit 2) when it does not fit.
void check_form(const Request& r) {
  auto usage_error = [](const std::string& what) { throw ringtorch::InvalidArgumentError(what); };
  const std::string& form = r.args.front();
  if (form == "merge" && r.args.size() < 3) usage_error("merge needs OUT and at least one IN");
  if (form == "plot" && r.args.size() != 3) usage_error("plot needs METRICS and OUT.svg");
  if (form == "draw" && r.args.size() != 3) usage_error("draw needs TRACE and OUT.svg");
  const bool is_dir = form != "merge" && form != "plot" && form != "draw";
  if (is_dir && r.args.size() != 1) usage_error("unexpected argument '" + r.args[1] + "'");
  if (r.json && !is_dir) usage_error("--json goes with ringtrace DIR");
  if (r.window_given && form != "draw") usage_error("--from-step and --ms go with ringtrace draw");
}

int run(const Request& r) {
  const std::vector<std::string>& args = r.args;
  if (args[0] == "merge") {
    size_t events = 0;
    const std::string merged = ringtorch::merge_chrome_traces({args.begin() + 2, args.end()}, &events);
    ringtorch::write_file_atomically(args[1], merged, "ringtrace merge");
    std::printf("%s: %zu events from %zu files\n", args[1].c_str(), events, args.size() - 2);
    return 0;
  }
  if (args[0] == "plot") {
    const auto epochs = ringtorch::read_metrics_file(args[1]);
    ringtorch::plot_run(epochs, args[2], "ringtrain");
    std::printf("%s: %zu epochs\n", args[2].c_str(), epochs.size());
    return 0;
  }
  if (args[0] == "draw") {
    ringtorch::plot_timeline(args[1], args[2], r.window);
    std::printf("%s: %.3g ms from rank 0's step %d\n", args[2].c_str(), r.window.milliseconds, r.window.from_step);
    return 0;
  }
  const ringtorch::FlightAnalysis analysis = ringtorch::analyze_flight_dumps(args[0]);
  std::fputs(r.json ? (analysis.to_json() + "\n").c_str() : analysis.to_text().c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ringtorch::Timeline::release_environment_file();  // RINGTORCH_TIMELINE may name the file read here
  Request request;
  ringtorch::CommandLine cli("ringtrace", kUsage);
  cli.flag("--json", [&](bool on) { request.json = on; })
      .option("--from-step",
              [&](const std::string& v) {
                request.window.from_step = ringtorch::parse_int_in_range(v, 0, 1 << 30, "--from-step");
                request.window_given = true;
              })
      .option("--ms",
              [&](const std::string& v) {
                request.window.milliseconds = ringtorch::parse_number_in_range(v, 0.001, 1e9, "--ms");
                request.window_given = true;
              })
      .positionals();
  if (const int status = cli.parse_main(argc, argv); status >= 0) return status;
  request.args = cli.rest();
  try {
    if (request.args.empty()) throw ringtorch::InvalidArgumentError("give a directory, or merge, plot or draw");
    check_form(request);
  } catch (const ringtorch::Error& e) {
    std::fprintf(stderr, "ringtrace: %s (see ringtrace --help)\n", e.what());
    return 2;
  }
  return ringtorch::run_reporting_errors("ringtrace", [&] { return run(request); });
}
