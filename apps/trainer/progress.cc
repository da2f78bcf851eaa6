#include "apps/trainer/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include <ringtorch/error.h>

namespace ringtorch {
namespace {

constexpr int kBarWidth = 20;
// Redrawing more often than this only costs terminal time.
constexpr std::chrono::milliseconds kRedrawInterval(100);

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string loss_text(std::optional<double> loss) {
  if (!loss) return "-";
  char text[32];
  std::snprintf(text, sizeof(text), "%.4f", *loss);
  return text;
}

}  // namespace

ProgressStyle parse_progress_style(const std::string& text, std::FILE* out) {
  if (text == "auto") return ::isatty(::fileno(out)) ? ProgressStyle::kBar : ProgressStyle::kLines;
  if (text == "bar") return ProgressStyle::kBar;
  if (text == "lines") return ProgressStyle::kLines;
  if (text == "off") return ProgressStyle::kOff;
  throw InvalidArgumentError("--progress " + text + ": use auto, bar, lines or off");
}

ProgressReporter::ProgressReporter(std::FILE* out, ProgressStyle style, int log_interval)
    : out_(out), style_(style), log_interval_(log_interval) {}

void ProgressReporter::begin_epoch(int64_t epoch, int epochs, int64_t samples) {
  epoch_ = epoch;
  epochs_ = epochs;
  samples_ = samples;
  started_ = std::chrono::steady_clock::now();
  drawn_ = {};
  logged_batches_ = 0;
}

void ProgressReporter::update(int64_t done, int64_t batches, std::optional<double> loss) {
  if (style_ == ProgressStyle::kBar) {
    if (std::chrono::steady_clock::now() - drawn_ >= kRedrawInterval || done >= samples_) draw(done, loss);
  } else if (style_ == ProgressStyle::kLines && log_interval_ > 0 &&
             batches / log_interval_ > logged_batches_ / log_interval_) {
    // Passed, not hit: with --local-steps the count moves a period's inner steps at a time.
    logged_batches_ = batches;
    std::fprintf(out_, "  epoch %lld: %lld/%lld samples, %.0f samples/s (all ranks), loss %s\n",
                 static_cast<long long>(epoch_ + 1), static_cast<long long>(done), static_cast<long long>(samples_),
                 done / seconds_since(started_), loss_text(loss).c_str());
    std::fflush(out_);
  }
}

void ProgressReporter::draw(int64_t done, std::optional<double> loss) {
  const double fraction = samples_ > 0 ? static_cast<double>(done) / samples_ : 1.0;
  const int filled = static_cast<int>(fraction * kBarWidth);
  char bar[kBarWidth + 1];
  for (int i = 0; i < kBarWidth; ++i) bar[i] = i < filled ? '#' : '.';
  bar[kBarWidth] = '\0';
  const double rate = done / std::max(seconds_since(started_), 1e-9);
  // \r returns to the line's start; \033[K clears what a longer previous line left.
  std::fprintf(out_, "\repoch %lld/%lld [%s] %3d%%  %lld/%lld  %.1fk samples/s  loss %s\033[K",
               static_cast<long long>(epoch_ + 1), static_cast<long long>(epochs_), bar,
               static_cast<int>(fraction * 100), static_cast<long long>(done), static_cast<long long>(samples_),
               rate / 1000, loss_text(loss).c_str());
  std::fflush(out_);
  drawn_ = std::chrono::steady_clock::now();
  bar_open_ = true;
}

void ProgressReporter::end_epoch() {
  if (bar_open_) {
    std::fputc('\n', out_);
    std::fflush(out_);
    bar_open_ = false;
  }
}

}  // namespace ringtorch
