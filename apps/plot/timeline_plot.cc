#include "apps/plot/timeline_plot.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include <ringtorch/error.h>

#ifdef RINGTORCH_WITH_PLPLOT
#include <plplot/plplot.h>
#endif

namespace ringtorch {

#ifdef RINGTORCH_WITH_PLPLOT
namespace {

struct Span {
  int pid = 0, tid = 0;
  std::string name;
  double start_ms = 0, end_ms = 0;
  int depth = 0;
};

// Colours by span name; collectives share one, DDP buckets another.
struct Palette {
  std::vector<std::pair<std::string, std::array<int, 3>>> entries = {
      {"epoch", {235, 235, 235}},     {"step", {200, 200, 200}},       {"load batch", {140, 86, 75}},
      {"forward", {31, 119, 180}},    {"backward", {255, 127, 14}},    {"optimizer", {44, 160, 44}},
      {"collective", {214, 39, 40}},  {"ddp bucket", {148, 103, 189}}, {"evaluate", {227, 119, 194}},
      {"checkpoint", {188, 189, 34}}, {"other", {127, 127, 127}}};
  size_t index_of(const Span& s, const std::string& category) const {
    std::string key = s.name;
    if (category == "collective") key = "collective";
    if (category == "ddp") key = "ddp bucket";
    for (size_t k = 0; k < entries.size(); ++k) {
      if (entries[k].first == key) return k;
    }
    return entries.size() - 1;
  }
};

}  // namespace

void plot_timeline(const std::string& trace_path, const std::string& svg_path, const TimelineWindow& window) {
  if (svg_path.size() < 4 || svg_path.substr(svg_path.size() - 4) != ".svg") {
    throw InvalidArgumentError(str_cat("timeline picture ", svg_path, ": give a file name ending in .svg"));
  }
  std::ifstream in(trace_path, std::ios::binary);
  if (!in) throw IoError(str_cat("timeline ", trace_path, ": cannot open: ", errno_text(errno)));
  const nlohmann::json trace = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (trace.is_discarded() || !trace.is_object() || !trace.contains("traceEvents")) {
    throw IoError(str_cat("timeline ", trace_path, ": not a Chrome trace"));
  }
  std::map<std::pair<int, int>, std::string> lane_names;
  std::vector<Span> spans;
  std::vector<std::string> categories;
  std::vector<double> rank0_steps;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    const int pid = e.value("pid", 0), tid = e.value("tid", 0);
    if (ph == "M" && e.value("name", "") == "thread_name") {
      lane_names[{pid, tid}] = e["args"].value("name", "");
    } else if (ph == "X") {
      Span s;
      s.pid = pid;
      s.tid = tid;
      s.name = e.value("name", "");
      s.start_ms = e.value("ts", 0.0) / 1000.0;
      s.end_ms = s.start_ms + e.value("dur", 0.0) / 1000.0;
      if (pid == 0 && s.name == "step") rank0_steps.push_back(s.start_ms);
      spans.push_back(s);
      categories.push_back(e.value("cat", ""));
    }
  }
  if (spans.empty()) throw InvalidArgumentError(str_cat("timeline ", trace_path, ": no spans to draw"));
  std::sort(rank0_steps.begin(), rank0_steps.end());
  double t0 = spans.front().start_ms;
  for (const auto& s : spans) t0 = std::min(t0, s.start_ms);
  if (!rank0_steps.empty()) {
    t0 = rank0_steps[std::min(rank0_steps.size() - 1, static_cast<size_t>(std::max(0, window.from_step)))];
  }
  const double t1 = t0 + window.milliseconds;
  // Nesting depth per lane: a span inside an earlier one on the same lane goes one row lower.
  std::vector<size_t> order(spans.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (spans[a].start_ms != spans[b].start_ms) return spans[a].start_ms < spans[b].start_ms;
    return spans[a].end_ms > spans[b].end_ms;  // the parent first
  });
  std::map<std::pair<int, int>, std::vector<double>> open_ends;  // per lane: ends of enclosing spans
  std::map<std::pair<int, int>, int> lane_depth;
  for (size_t k : order) {
    auto& stack = open_ends[{spans[k].pid, spans[k].tid}];
    while (!stack.empty() && stack.back() <= spans[k].start_ms) stack.pop_back();
    spans[k].depth = std::min<int>(static_cast<int>(stack.size()), 2);
    stack.push_back(spans[k].end_ms);
    if (spans[k].end_ms > t0 && spans[k].start_ms < t1) {
      int& d = lane_depth[{spans[k].pid, spans[k].tid}];
      d = std::max(d, spans[k].depth + 1);
    }
  }
  if (lane_depth.empty()) throw InvalidArgumentError(str_cat("timeline ", trace_path, ": no span in the window"));
  // Rows from the top: each lane as tall as its depth.
  std::map<std::pair<int, int>, double> lane_top;
  double rows = 0;
  for (const auto& [lane, depth] : lane_depth) {
    lane_top[lane] = rows;
    rows += depth + 0.4;
  }

  static std::mutex plplot_state;
  std::lock_guard<std::mutex> lock(plplot_state);
  {
    std::ofstream probe(svg_path);
    if (!probe) throw IoError(str_cat("timeline picture ", svg_path, ": cannot write: ", errno_text(errno)));
  }
  const Palette palette;
  plsdev("svg");
  plsfnam(svg_path.c_str());
  plspage(0, 0, 1500, static_cast<PLINT>(170 + 34 * rows), 0, 0);
  plscol0(0, 255, 255, 255);
  plscol0(1, 0, 0, 0);
  for (size_t k = 0; k < palette.entries.size(); ++k) {
    const auto& c = palette.entries[k].second;
    plscol0(static_cast<PLINT>(2 + k), c[0], c[1], c[2]);
  }
  plinit();
  pladv(0);
  plschr(0, 0.75);
  plvpor(0.22, 0.98, 0.27, 0.9);
  plwind(0, window.milliseconds, rows, 0);
  plcol0(1);
  plbox("bcnst", 0, 0, "bc", 0, 0);
  pllab(str_cat("milliseconds from the start of rank 0's step ", window.from_step).c_str(), "",
        "ringtorch timeline: spans per rank and thread");
  for (const auto& [lane, top] : lane_top) {  // names left of the box, at each lane's first row
    const std::string name = str_cat("rank ", lane.first, ": ", lane_names.count(lane) ? lane_names[lane] : "thread");
    plmtex("lv", 0.8, (rows - top - 0.55) / rows, 1, name.c_str());
  }
  for (size_t k = 0; k < spans.size(); ++k) {
    const Span& s = spans[k];
    if (s.end_ms <= t0 || s.start_ms >= t1) continue;
    const double x0 = std::max(s.start_ms, t0) - t0, x1 = std::min(s.end_ms, t1) - t0;
    const double y0 = lane_top[{s.pid, s.tid}] + s.depth, y1 = y0 + 0.9;
    PLFLT xs[4] = {x0, x1, x1, x0}, ys[4] = {y0, y0, y1, y1};
    plcol0(static_cast<PLINT>(2 + palette.index_of(s, categories[k])));
    plfill(4, xs, ys);
    if (x1 - x0 > window.milliseconds * 0.06) {
      plcol0(1);
      plptex((x0 + x1) / 2, y0 + 0.6, 1, 0, 0.5, s.name.c_str());
    }
  }
  // The legend: a swatch and a name per colour, in a strip under the axis.
  constexpr int kPerRow = 6;
  plvpor(0.22, 0.98, 0.04, 0.13);
  plwind(0, kPerRow, 2.3, 0);
  for (size_t k = 0; k < palette.entries.size(); ++k) {
    const double x = static_cast<double>(k % kPerRow), y = static_cast<double>(k / kPerRow);
    PLFLT xs[4] = {x, x + 0.1, x + 0.1, x}, ys[4] = {y + 0.15, y + 0.15, y + 0.85, y + 0.85};
    plcol0(static_cast<PLINT>(2 + k));
    plfill(4, xs, ys);
    plcol0(1);
    plptex(x + 0.15, y + 0.7, 1, 0, 0, palette.entries[k].first.c_str());
  }
  plend();
}

#else

void plot_timeline(const std::string&, const std::string& svg_path, const TimelineWindow&) {
  throw InvalidArgumentError(
      str_cat("timeline picture ", svg_path,
              ": this build has no PLplot; apt-get install libplplot-dev, then configure again"));
}

#endif

}  // namespace ringtorch
