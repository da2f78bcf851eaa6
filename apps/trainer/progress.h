// Training progress on rank 0. On a terminal, one bar redrawn in place (carriage return) with
// the samples done, samples/s over all ranks and the latest loss, finished by a newline at the
// end of the epoch:
//
//   epoch 1/3 [###########.........]  55%  33024/60000  16.6k samples/s  loss 0.5123
//
// Elsewhere (a pipe, a log file, ringrun's forwarded output) the same facts as plain lines
// every `log_interval` batches, so logs stay readable.
//
// Thread-safety: one thread (the training loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace ringtorch {

enum class ProgressStyle { kBar, kLines, kOff };

// "auto" (bar when `out` is a terminal, else lines), "bar", "lines", "off"; throws
// InvalidArgumentError naming --progress otherwise.
ProgressStyle parse_progress_style(const std::string& text, std::FILE* out);

class ProgressReporter {
 public:
  ProgressReporter(std::FILE* out, ProgressStyle style, int log_interval);

  // `samples` counts all ranks' samples of this epoch.
  void begin_epoch(int64_t epoch, int epochs, int64_t samples);
  // After each batch (with --local-steps, each period): `done` samples of all ranks so far this
  // epoch, this rank's batch count, the loss of its latest batch (with --local-steps, the mean of
  // its latest period's; nullopt before its first this epoch: with --balance dynamic a rank may
  // train none of a period's batches). Lines come each time the batch count passes a multiple of
  // log_interval.
  void update(int64_t done, int64_t batches, std::optional<double> loss);
  void end_epoch();

 private:
  void draw(int64_t done, std::optional<double> loss);

  std::FILE* out_;
  ProgressStyle style_;
  int log_interval_;
  int64_t epoch_ = 0, epochs_ = 0, samples_ = 0;
  int64_t logged_batches_ = 0;  // the batch count at the last line
  std::chrono::steady_clock::time_point started_, drawn_;
  bool bar_open_ = false;
};

}  // namespace ringtorch
