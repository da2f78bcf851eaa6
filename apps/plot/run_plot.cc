#include "apps/plot/run_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>

#include <ringtorch/error.h>

#ifdef RINGTORCH_WITH_PLPLOT
#include <plplot/plplot.h>
#endif

namespace ringtorch {

std::vector<EpochMetrics> read_metrics_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError(str_cat("metrics file ", path, ": cannot open: ", errno_text(errno)));
  std::vector<EpochMetrics> runs;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("epoch")) {
      throw IoError(str_cat("metrics file ", path, " line ", number, ": not a ringtrain metrics line"));
    }
    EpochMetrics m;
    try {
      m.epoch = j.at("epoch").get<int>();
      m.loss = j.value("loss", 0.0);
      m.test_accuracy = j.value("test_accuracy", 0.0);
      m.seconds = j.value("seconds", 0.0);
      m.samples_per_s = j.value("samples_per_s", 0.0);
      if (j.contains("ranks")) {
        for (const auto& r : j.at("ranks")) m.rank_samples_per_s.push_back(r.value("samples_per_s", 0.0));
      }
    } catch (const nlohmann::json::exception& e) {
      throw IoError(str_cat("metrics file ", path, " line ", number, ": ", e.what()));
    }
    if (!runs.empty() && m.epoch <= runs.back().epoch) runs.clear();  // a new run starts here
    runs.push_back(std::move(m));
  }
  return runs;
}

#ifdef RINGTORCH_WITH_PLPLOT

bool can_plot() { return true; }

namespace {

// cmap0 entries: 0 background, 1 axes and text, 2.. one per series.
constexpr int kSeriesColors[][3] = {{31, 119, 180},  {255, 127, 14}, {44, 160, 44},   {214, 39, 40},
                                    {148, 103, 189}, {140, 86, 75},  {227, 119, 194}, {127, 127, 127}};
constexpr int kColorCount = sizeof(kSeriesColors) / sizeof(kSeriesColors[0]);

void draw_panel(const std::vector<PLFLT>& x, const std::vector<std::vector<PLFLT>>& series,
                const std::vector<std::string>& names, const char* y_label, const char* title) {
  PLFLT lo = 0, hi = 0;
  bool first = true;
  for (const auto& s : series) {
    for (PLFLT v : s) {
      lo = first ? v : std::min(lo, v);
      hi = first ? v : std::max(hi, v);
      first = false;
    }
  }
  const PLFLT pad = hi > lo ? (hi - lo) * 0.1 : std::max<PLFLT>(std::abs(hi) * 0.1, 0.01);
  // Room above the data for the series' names when there are several.
  const PLFLT top = hi + pad * (names.size() > 1 ? 3.5 : 1);
  const PLFLT epochs = x.back() - x.front() + 1;
  pladv(0);
  plvpor(0.25, 0.96, 0.17, 0.86);
  plwind(x.front() - 0.5, x.back() + 0.5, lo - pad, top);
  plcol0(1);
  plbox("bcnst", std::max<PLFLT>(1, std::ceil(epochs / 8)), 0, "bcnstv", 0, 0);
  pllab("epoch", y_label, title);
  for (size_t k = 0; k < series.size(); ++k) {
    plcol0(2 + static_cast<int>(k % kColorCount));
    plwidth(2);
    plline(static_cast<PLINT>(x.size()), x.data(), series[k].data());
    plpoin(static_cast<PLINT>(x.size()), x.data(), series[k].data(), 17);
    if (names.size() > 1) {  // the series' name, in its colour, in a row inside the top of the box
      plmtex("t", -1.5, (static_cast<PLFLT>(k) + 0.5) / static_cast<PLFLT>(names.size()), 0.5, names[k].c_str());
    }
  }
  plwidth(1);
}

}  // namespace

void plot_run(const std::vector<EpochMetrics>& epochs, const std::string& path, const std::string& title) {
  if (std::filesystem::path(path).extension() != ".svg") {
    throw InvalidArgumentError(str_cat("plot ", path, ": give a file name ending in .svg"));
  }
  if (epochs.empty()) throw InvalidArgumentError(str_cat("plot ", path, ": no epoch to draw"));
  std::vector<PLFLT> x, loss, accuracy;
  size_t ranks = 0;
  for (const auto& e : epochs) ranks = std::max(ranks, e.rank_samples_per_s.size());
  std::vector<std::vector<PLFLT>> per_rank(std::max<size_t>(ranks, 1));
  for (const auto& e : epochs) {
    x.push_back(e.epoch);
    loss.push_back(e.loss);
    accuracy.push_back(e.test_accuracy);
    for (size_t r = 0; r < per_rank.size(); ++r) {
      per_rank[r].push_back(ranks == 0                        ? e.samples_per_s
                            : r < e.rank_samples_per_s.size() ? e.rank_samples_per_s[r]
                                                              : 0.0);
    }
  }
  std::vector<std::string> rank_names;
  for (size_t r = 0; r < per_rank.size(); ++r) rank_names.push_back(ranks ? str_cat("rank ", r) : "all ranks");

  static std::mutex plplot_state;  // PLplot has one global stream state
  std::lock_guard<std::mutex> lock(plplot_state);
  {  // PLplot reports a file it cannot open by exiting; check first
    std::ofstream probe(path);
    if (!probe) throw IoError(str_cat("plot ", path, ": cannot write: ", errno_text(errno)));
  }
  plsdev("svg");
  plsfnam(path.c_str());
  plspage(0, 0, 1500, 450, 0, 0);
  plscol0(0, 255, 255, 255);
  plscol0(1, 0, 0, 0);
  for (int k = 0; k < kColorCount; ++k) plscol0(2 + k, kSeriesColors[k][0], kSeriesColors[k][1], kSeriesColors[k][2]);
  plssub(3, 1);
  plinit();
  plschr(0, 0.9);
  draw_panel(x, {loss}, {"loss"}, "mean training loss", title.c_str());
  draw_panel(x, {accuracy}, {"accuracy"}, "test accuracy", "test accuracy");
  draw_panel(x, per_rank, rank_names, "samples/s", "samples/s per rank");
  plend();
}

#else

bool can_plot() { return false; }

void plot_run(const std::vector<EpochMetrics>&, const std::string& path, const std::string&) {
  throw InvalidArgumentError(
      str_cat("plot ", path, ": this build has no PLplot; apt-get install libplplot-dev, then configure again"));
}

#endif

}  // namespace ringtorch
