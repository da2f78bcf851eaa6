// The child's side of spawn() (spawn.h): the marker a spawned process finds in its environment,
// and running fn there. Used by spawn.cc only.
//
// The marker, RINGTORCH_SPAWNED="<call>:<rank>:<site>:<directory>": which spawn() call of the
// program (counted from 1), which rank, a hash of the call's file and line (so that a child that
// reaches a different call with the same number says so instead of running the wrong fn), and
// the parent's private directory (the store, and the files below).
//
// Thread-safety: the marker is read while the library loads, before main() and its threads;
// everything here is then read-only, except the flag run_child() sets before fn runs.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>

namespace ringtorch {
namespace spawn_internal {

constexpr char kChildMarker[] = "RINGTORCH_SPAWNED";

struct ChildMarker {
  int call = 0;
  int rank = 0;
  uint32_t site = 0;
  std::string directory;
};

// Where a spawn() call is in the program: a hash of its file and line.
uint32_t call_site(const char* file, int line);

std::string format_marker(const ChildMarker& marker);

// This process's marker, read and removed from the environment when the library was loaded (so
// no program started before spawn() inherits it); nullopt in a process spawn() did not start.
// Throws InvalidArgumentError when the variable was malformed (then it is left in place).
const std::optional<ChildMarker>& child_marker();

// Files a child leaves in the parent's directory: "reached" when it runs fn, "error" with the
// exception fn threw ("InvalidArgumentError: ...").
std::string reached_file(const std::string& directory, int rank);
std::string error_file(const std::string& directory, int rank);

// "InvalidArgumentError: ..." for ringtorch's errors, "c10::Error: ..." (the class) for others.
std::string describe_exception(const std::exception& e);

// True while fn runs in a spawned child.
bool running_spawned_function();

// Runs fn(marker.rank) in the child and exits the process: 0 when fn returns, 1 when it throws
// (its description in the error file). Checks first that `site` and `nprocs` are the parent's.
[[noreturn]] void run_child(const std::function<void(int)>& fn, const ChildMarker& marker, uint32_t site,
                            const char* file, int line, int nprocs);

}  // namespace spawn_internal
}  // namespace ringtorch
