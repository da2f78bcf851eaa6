// Names for a program's own operations in the flight recorder and the timeline
// (docs/observability.md).
#pragma once

#include <string>

namespace ringtorch {

// Names the operations the calling thread submits while it lives ("ddp bucket 3, step 17"), in
// the flight recorder and the timeline. Nests; the innermost wins.
//
// Thread-safety: the label is the calling thread's own.
class ScopedOperationLabel {
 public:
  explicit ScopedOperationLabel(std::string label);
  ~ScopedOperationLabel();
  ScopedOperationLabel(const ScopedOperationLabel&) = delete;
  ScopedOperationLabel& operator=(const ScopedOperationLabel&) = delete;
  // The calling thread's current label ("" when none).
  static const std::string& current();

 private:
  std::string previous_;
};

}  // namespace ringtorch
