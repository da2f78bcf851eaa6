// Every program linked with ringtorch writes stdout a line at a time when stdout is not a
// terminal (a pipe under ringrun or a container's log driver, a file), as it already does on a
// terminal. C's default there is a 4 KiB block buffer, so a worker's printf lines reached
// ringrun only when the buffer filled or the worker exited: late, and out of order with its
// stderr, which is unbuffered. RINGTORCH_LINE_BUFFERED_STDOUT=0 keeps the C default (a program
// that writes large volumes to a file). docs/launcher.md, "Workers' output".
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ringtorch {
namespace {

// Runs when the library is loaded, before main() and so before anything is written: setvbuf is
// only allowed before a stream's first use. std::cout goes through stdout (synced with stdio by
// default) and follows.
struct LineBufferedStdout {
  LineBufferedStdout() {
    const char* choice = std::getenv("RINGTORCH_LINE_BUFFERED_STDOUT");
    if (choice != nullptr && std::strcmp(choice, "0") == 0) return;
    if (::isatty(STDOUT_FILENO) == 1) return;  // already line-buffered
    std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);
  }
};
const LineBufferedStdout line_buffered_stdout;

}  // namespace
}  // namespace ringtorch
