// The timeline: spans of what this process did (training steps, DDP buckets, collectives,
// checkpoints, rendezvous), written as a Chrome trace, the JSON that Perfetto
// (ui.perfetto.dev) and chrome://tracing open. Horovod's timeline for ringtorch.
//
// Off unless turned on, and then bounded: the newest `max_events` spans are kept (a rolling
// window; older ones are dropped and counted), so a long run never grows without limit.
//   RINGTORCH_TIMELINE=FILE            on from the start; FILE is written at exit (and by flush()),
//                                      unless the process recorded nothing
//   RINGTORCH_TIMELINE_MAX_EVENTS=N    the window (default 200000, about 30 MB at most)
//   Timeline::start()/stop()           the same from the API, for a part of a run
// ringrun --timeline FILE gives each worker its own part file and merges them into FILE;
// ringtrain --timeline FILE gathers every rank's spans to rank 0, which writes FILE.
//
// Times are wall-clock microseconds (system_clock), so ranks on different hosts line up as
// well as their clocks do (NTP: within a millisecond or so); a span's duration is measured on
// steady_clock. Each rank is a Chrome "process" (pid = rank) and each thread a "thread".
//
// Example:
//   ringtorch::Timeline::start();
//   {
//     ringtorch::TimelineSpan span("step", "train");
//     // ... the work ...
//   }
//   std::string trace = ringtorch::Timeline::chrome_trace_json();  // or write_file("run.json")
//
// Thread-safety: every function may be called from any thread (one mutex around the window;
// enabled() is one atomic load, which is all a span costs when the timeline is off).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringtorch {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  // One span, as recorded. `args` is a JSON object's text ("{\"bytes\":4}") or empty.
  struct Event {
    std::string name;
    const char* category = "";  // a string literal: "train", "ddp", "collective", ...
    int64_t start_us = 0;       // wall clock, microseconds since the epoch
    int64_t duration_us = 0;
    int thread = 0;  // this process' thread number (thread_name() names it)
    std::string args;
  };

  static bool enabled() { return enabled_.load(std::memory_order_relaxed); }
  // Turns recording on (keeping what is recorded) with a window of `max_events` (0: the
  // environment's or the default).
  static void start(size_t max_events = 0);
  static void stop();  // recording off; what was recorded stays
  static void clear();

  // Records a span that ran from `begin` to `end` on the calling thread. No-op when off.
  static void record(std::string name, const char* category, Clock::time_point begin, Clock::time_point end,
                     std::string args = {});
  // The same on a lane of its own (spans that overlap without nesting, such as DDP buckets,
  // each on its lane); lanes are numbered from kFirstLane up and named with name_lane().
  static constexpr int kFirstLane = 1000;
  static void record_on_lane(int lane, std::string name, const char* category, Clock::time_point begin,
                             Clock::time_point end, std::string args = {});
  // Names the calling thread in the trace ("training loop", "collectives (group default)").
  static void name_this_thread(const std::string& name);
  static void name_lane(int lane, const std::string& name);
  // The rank used as the trace's pid: RANK from the environment until a process group sets it.
  static void set_rank(int rank);

  // What is recorded now, oldest first, and how many spans the window dropped.
  static std::vector<Event> events(size_t* dropped = nullptr);
  // The whole trace: {"traceEvents": [...], "displayTimeUnit": "ms", ...}.
  static std::string chrome_trace_json();
  // Writes chrome_trace_json() to `path` atomically (a temporary file, then rename). Throws
  // IoError naming the path.
  static void write_file(const std::string& path);
  // RINGTORCH_TIMELINE's file, if recording started from the environment and something was
  // recorded, now; else nothing.
  static void flush();
  // For a launcher, whose RINGTORCH_TIMELINE names the file it merges its workers' parts into:
  // stops recording and never writes that file from this process.
  static void release_environment_file();

 private:
  static std::atomic<bool> enabled_;
};

// Records the span from construction to destruction (when the timeline is on).
class TimelineSpan {
 public:
  TimelineSpan(const char* name, const char* category)
      : name_(name),
        category_(category),
        begin_(Timeline::enabled() ? Timeline::Clock::now() : Timeline::Clock::time_point{}) {}
  ~TimelineSpan() {
    if (begin_ != Timeline::Clock::time_point{})
      Timeline::record(name_, category_, begin_, Timeline::Clock::now(), args_);
  }
  void set_args(std::string args) { args_ = std::move(args); }
  TimelineSpan(const TimelineSpan&) = delete;
  TimelineSpan& operator=(const TimelineSpan&) = delete;

 private:
  const char* name_;
  const char* category_;
  Timeline::Clock::time_point begin_;
  std::string args_;
};

// Merges Chrome traces (whole files, as Timeline::write_file writes them) into one, events
// sorted by time. Throws IoError naming a file that cannot be read or is not a trace.
std::string merge_chrome_traces(const std::vector<std::string>& paths, size_t* events_merged = nullptr);
// The same from the traces' texts (ringtrain gathers every rank's to rank 0); `names` say where
// each came from in errors.
std::string merge_chrome_trace_texts(const std::vector<std::string>& traces, const std::vector<std::string>& names,
                                     size_t* events_merged = nullptr);

}  // namespace ringtorch
