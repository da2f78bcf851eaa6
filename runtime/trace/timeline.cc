#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include <ringtorch/error.h>
#include <ringtorch/timeline.h>

#include "base/atomic_file.h"
#include "base/log.h"
#include "base/parse.h"

namespace ringtorch {
namespace {

constexpr size_t kDefaultMaxEvents = 200000;

struct Window {
  std::mutex mutex;
  std::deque<Timeline::Event> events;       // guarded by mutex
  size_t max_events = kDefaultMaxEvents;    // guarded by mutex
  size_t dropped = 0;                       // guarded by mutex
  std::map<int, std::string> thread_names;  // guarded by mutex
  int next_thread = 0;                      // guarded by mutex
  int rank = -1;                            // guarded by mutex; -1: RANK from the environment
  std::string env_file;                     // guarded by mutex: RINGTORCH_TIMELINE, until released
  // steady_clock -> wall clock, fixed once so that spans never move relative to each other.
  const int64_t wall_minus_steady_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count() -
      std::chrono::duration_cast<std::chrono::microseconds>(Timeline::Clock::now().time_since_epoch()).count();
};

Window& window() {
  static Window* w = new Window;  // never destroyed: spans may be recorded during exit
  return *w;
}

size_t max_events_from_environment() {
  const char* text = std::getenv("RINGTORCH_TIMELINE_MAX_EVENTS");
  if (!text || !*text) return kDefaultMaxEvents;
  return static_cast<size_t>(parse_int_in_range(text, 1, int64_t{1} << 32, "RINGTORCH_TIMELINE_MAX_EVENTS"));
}

// Called with the window's mutex held.
int thread_number(Window& w) {
  thread_local int number = -1;
  if (number < 0) number = w.next_thread++;
  return number;
}

int trace_pid(const Window& w) {
  if (w.rank >= 0) return w.rank;
  const char* rank = std::getenv("RANK");
  return rank && *rank ? std::atoi(rank) : 0;
}

int64_t to_wall_us(const Window& w, Timeline::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() + w.wall_minus_steady_us;
}

// The events and names as traceEvents entries. Called with the window's mutex held.
nlohmann::json event_array(const Window& w) {
  const int pid = trace_pid(w);
  nlohmann::json out = nlohmann::json::array();
  out.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", str_cat("rank ", pid)}}}});
  out.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
  for (const auto& [thread, name] : w.thread_names) {
    out.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", thread}, {"args", {{"name", name}}}});
  }
  for (const auto& e : w.events) {
    nlohmann::json event = {{"name", e.name},       {"cat", e.category}, {"ph", "X"},      {"ts", e.start_us},
                            {"dur", e.duration_us}, {"pid", pid},        {"tid", e.thread}};
    if (!e.args.empty()) {
      nlohmann::json args = nlohmann::json::parse(e.args, nullptr, /*allow_exceptions=*/false);
      event["args"] = args.is_discarded() ? nlohmann::json{{"text", e.args}} : std::move(args);  // a caller's bad JSON
    }
    out.push_back(std::move(event));
  }
  return out;
}

struct EnvironmentStart {
  EnvironmentStart() {
    const char* file = std::getenv("RINGTORCH_TIMELINE");
    if (!file || !*file) return;
    window().env_file = file;
    try {
      Timeline::start();
    } catch (const std::exception& e) {  // a malformed RINGTORCH_TIMELINE_MAX_EVENTS, before main()
      log_warning(std::string(e.what()) + "; the timeline keeps the default window");
      Timeline::start(kDefaultMaxEvents);
    }
    std::atexit([] {
      try {
        Timeline::flush();
      } catch (const std::exception& e) {
        log_error(std::string("RINGTORCH_TIMELINE: ") + e.what());
      }
    });
  }
};
const EnvironmentStart environment_start;

}  // namespace

std::atomic<bool> Timeline::enabled_{false};

void Timeline::start(size_t max_events) {
  Window& w = window();
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    w.max_events = max_events > 0 ? max_events : max_events_from_environment();
    while (w.events.size() > w.max_events) {
      w.events.pop_front();
      ++w.dropped;
    }
  }
  enabled_.store(true);
}

void Timeline::stop() { enabled_.store(false); }

void Timeline::clear() {
  Window& w = window();
  std::lock_guard<std::mutex> lock(w.mutex);
  w.events.clear();
  w.dropped = 0;
}

namespace {

// Called with the window's mutex held.
void add_event(Window& w, int thread, std::string name, const char* category, Timeline::Clock::time_point begin,
               Timeline::Clock::time_point end, std::string args) {
  Timeline::Event e;
  e.name = std::move(name);
  e.category = category;
  e.start_us = to_wall_us(w, begin);
  e.duration_us = std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::microseconds>(end - begin).count());
  e.thread = thread;
  e.args = std::move(args);
  if (w.events.size() >= w.max_events) {
    w.events.pop_front();
    ++w.dropped;
  }
  w.events.push_back(std::move(e));
}

}  // namespace

void Timeline::record_on_lane(int lane, std::string name, const char* category, Clock::time_point begin,
                              Clock::time_point end, std::string args) {
  if (!enabled()) return;
  Window& w = window();
  std::lock_guard<std::mutex> lock(w.mutex);
  add_event(w, lane, std::move(name), category, begin, end, std::move(args));
}

void Timeline::name_lane(int lane, const std::string& name) {
  Window& w = window();
  std::lock_guard<std::mutex> lock(w.mutex);
  w.thread_names[lane] = name;
}

void Timeline::record(std::string name, const char* category, Clock::time_point begin, Clock::time_point end,
                      std::string args) {
  if (!enabled()) return;
  Window& w = window();
  std::lock_guard<std::mutex> lock(w.mutex);
  add_event(w, thread_number(w), std::move(name), category, begin, end, std::move(args));
}

void Timeline::name_this_thread(const std::string& name) {
  Window& w = window();
  std::lock_guard<std::mutex> lock(w.mutex);
  w.thread_names[thread_number(w)] = name;
}

void Timeline::set_rank(int rank) {
  Window& w = window();
  std::lock_guard<std::mutex> lock(w.mutex);
  w.rank = rank;
}

std::vector<Timeline::Event> Timeline::events(size_t* dropped) {
  Window& w = window();
  std::lock_guard<std::mutex> lock(w.mutex);
  if (dropped) *dropped = w.dropped;
  return {w.events.begin(), w.events.end()};
}

std::string Timeline::chrome_trace_json() {
  Window& w = window();
  std::lock_guard<std::mutex> lock(w.mutex);
  nlohmann::json trace = {{"traceEvents", event_array(w)},
                          {"displayTimeUnit", "ms"},
                          {"otherData", {{"ringtorch_dropped_events", w.dropped}, {"max_events", w.max_events}}}};
  return trace.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void Timeline::write_file(const std::string& path) { write_file_atomically(path, chrome_trace_json(), "timeline"); }

void Timeline::flush() {
  std::string file;
  {
    Window& w = window();
    std::lock_guard<std::mutex> lock(w.mutex);
    file = w.env_file;
  }
  // A process that recorded nothing (a tool run with the variable set, a launcher's helper)
  // leaves the file alone: it may be someone else's.
  if (!file.empty() && !events().empty()) write_file(file);
}

void Timeline::release_environment_file() {
  stop();
  Window& w = window();
  std::lock_guard<std::mutex> lock(w.mutex);
  w.env_file.clear();
}

std::string merge_chrome_trace_texts(const std::vector<std::string>& traces, const std::vector<std::string>& names,
                                     size_t* events_merged) {
  nlohmann::json all = nlohmann::json::array();
  size_t dropped = 0;
  for (size_t k = 0; k < traces.size(); ++k) {
    nlohmann::json trace = nlohmann::json::parse(traces[k], nullptr, /*allow_exceptions=*/false);
    if (trace.is_discarded() || !trace.is_object() || !trace.contains("traceEvents") ||
        !trace["traceEvents"].is_array()) {
      throw IoError(str_cat("timeline ", k < names.size() ? names[k] : std::to_string(k),
                            ": not a Chrome trace (a JSON object with a traceEvents array)"));
    }
    for (auto& e : trace["traceEvents"]) all.push_back(std::move(e));
    if (trace.contains("otherData") && trace["otherData"].is_object()) {
      dropped += trace["otherData"].value("ringtorch_dropped_events", size_t{0});
    }
  }
  // Names first (they carry no time), then spans by start time.
  std::stable_sort(all.begin(), all.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    const bool a_meta = a.value("ph", "") == "M", b_meta = b.value("ph", "") == "M";
    if (a_meta != b_meta) return a_meta;
    return a.value("ts", int64_t{0}) < b.value("ts", int64_t{0});
  });
  if (events_merged) *events_merged = all.size();
  nlohmann::json trace = {{"traceEvents", std::move(all)},
                          {"displayTimeUnit", "ms"},
                          {"otherData", {{"ringtorch_dropped_events", dropped}}}};
  return trace.dump();
}

std::string merge_chrome_traces(const std::vector<std::string>& paths, size_t* events_merged) {
  std::vector<std::string> texts;
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(str_cat("timeline ", path, ": cannot open: ", errno_text(errno)));
    texts.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return merge_chrome_trace_texts(texts, paths, events_merged);
}

}  // namespace ringtorch
