// Collecting what this process writes to stderr (ringtorch's warnings) in a test.
//
// Thread-safety: none; it redirects the process's file descriptor 2 while it lives.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

namespace ringtorch {
namespace testing {

class StderrCapture {
 public:
  StderrCapture() : file_(std::tmpfile()), saved_(::dup(2)) {
    std::fflush(stderr);
    ::dup2(::fileno(file_), 2);
  }
  // Everything written since construction; stderr is the terminal's again.
  std::string finish() {
    std::fflush(stderr);
    ::dup2(saved_, 2);
    std::string text;
    std::rewind(file_);
    for (int c; (c = std::fgetc(file_)) != EOF;) text.push_back(static_cast<char>(c));
    return text;
  }
  ~StderrCapture() {
    ::dup2(saved_, 2);
    ::close(saved_);
    std::fclose(file_);
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

 private:
  std::FILE* file_;
  int saved_;
};

}  // namespace testing
}  // namespace ringtorch
