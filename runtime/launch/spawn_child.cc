#include "runtime/launch/spawn_child.h"

#include <cxxabi.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <typeinfo>

#include <ringtorch/error.h>

#include "base/log.h"
#include "base/parse.h"

namespace ringtorch {
namespace spawn_internal {
namespace {

struct MarkerAtLoad {
  std::optional<ChildMarker> marker;
  std::string error;  // non-empty: the variable was malformed

  MarkerAtLoad() {
    const char* value = std::getenv(kChildMarker);
    if (!value) return;
    const std::string text = value;
    size_t colons[3];
    size_t from = 0;
    for (size_t& c : colons) {
      c = text.find(':', from);
      if (c == std::string::npos) {
        error = str_cat(kChildMarker, "='", text,
                        "' is not '<call>:<rank>:<site>:<directory>'; ringtorch::spawn() sets it for the processes "
                        "it starts, not by hand");
        return;
      }
      from = c + 1;
    }
    try {
      ChildMarker m;
      m.call = parse_int_in_range(text.substr(0, colons[0]), 1, 1 << 30, kChildMarker);
      m.rank = parse_int_in_range(text.substr(colons[0] + 1, colons[1] - colons[0] - 1), 0, 1 << 20, kChildMarker);
      m.site = static_cast<uint32_t>(
          std::strtoul(text.substr(colons[1] + 1, colons[2] - colons[1] - 1).c_str(), nullptr, 16));
      m.directory = text.substr(colons[2] + 1);
      marker = m;
      ::unsetenv(kChildMarker);
    } catch (const Error& e) {
      error = e.what();
    }
  }
};

const MarkerAtLoad& marker_at_load() {
  static const MarkerAtLoad m;
  return m;
}

// Read while the library loads: before main(), so before any thread that could call getenv().
const bool g_marker_read_at_load = (marker_at_load(), true);

std::atomic<bool> g_running_fn{false};

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  // The parent would not know why: say it here, where the rank's stderr still reaches it.
  if (!out) log_error(str_cat("spawn: cannot write ", path, ": ", text));
}

}  // namespace

uint32_t call_site(const char* file, int line) {
  uint32_t hash = 2166136261u;  // FNV-1a
  for (const char c : str_cat(file, ":", line)) hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
  return hash;
}

std::string format_marker(const ChildMarker& m) {
  char site[9];
  std::snprintf(site, sizeof(site), "%08x", m.site);
  return str_cat(m.call, ":", m.rank, ":", site, ":", m.directory);
}

const std::optional<ChildMarker>& child_marker() {
  (void)g_marker_read_at_load;
  const MarkerAtLoad& m = marker_at_load();
  if (!m.error.empty()) throw InvalidArgumentError(m.error);
  return m.marker;
}

std::string reached_file(const std::string& directory, int rank) {
  return str_cat(directory, "/rank", rank, ".reached");
}

std::string error_file(const std::string& directory, int rank) { return str_cat(directory, "/rank", rank, ".error"); }

std::string describe_exception(const std::exception& e) {
  if (const auto* error = dynamic_cast<const Error*>(&e)) {
    return str_cat(error_class_name(error->kind()), ": ", e.what());
  }
  int status = 0;
  char* demangled = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
  const std::string type = status == 0 && demangled ? demangled : typeid(e).name();
  std::free(demangled);
  return str_cat(type, ": ", e.what());
}

bool running_spawned_function() { return g_running_fn; }

void run_child(const std::function<void(int)>& fn, const ChildMarker& marker, uint32_t site, const char* file, int line,
               int nprocs) {
  const std::string error = error_file(marker.directory, marker.rank);
  if (site != marker.site || marker.rank >= nprocs) {
    write_text(error, str_cat("spawn() call #", marker.call, " is at ", file, ":", line, " with nprocs ", nprocs,
                              " in this rank, not where the parent's call #", marker.call,
                              " was: the code before spawn() took another path here (spawn() calls must not depend "
                              "on in_spawned_child() or on anything that differs between runs)"));
    std::exit(1);
  }
  g_running_fn = true;
  write_text(reached_file(marker.directory, marker.rank), "");
  int code = 0;
  try {
    fn(marker.rank);
  } catch (const std::exception& e) {
    write_text(error, describe_exception(e));
    code = 1;
  } catch (...) {
    write_text(error, "an exception that is not a std::exception");
    code = 1;
  }
  std::fflush(nullptr);
  // As returning from main(): fn's objects are gone, static ones are destroyed as usual.
  std::exit(code);
}

}  // namespace spawn_internal
}  // namespace ringtorch
