// The flight recorder (ring, states, dumps), its analysis (ringtrace's findings, from dumps
// written here by hand and by real groups), the timeline (window, Chrome trace, merge), and a
// mismatch between thread ranks that dumps every rank's file.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include <ringtorch/error.h>
#include <ringtorch/process_group.h>
#include <ringtorch/timeline.h>

#include "runtime/launch/subprocess.h"
#include "runtime/trace/flight_analysis.h"
#include "runtime/trace/flight_recorder.h"
#include "support/error_of.h"
#include "support/scoped_environment.h"
#include "support/test_paths.h"
#include "support/thread_ranks.h"

namespace ringtorch {
namespace {

using nlohmann::json;
using testing::TempDir;

// Points dumps at `dir` for the scope of the test.
struct DumpDirectory : testing::ScopedEnvironment {
  explicit DumpDirectory(const std::string& dir) : ScopedEnvironment("RINGTORCH_FLIGHT_RECORDER_DIR", dir) {}
};

TEST(FlightRecorder, KeepsTheLastNOperationsWithTheirStates) {
  auto recorder = FlightRecorder::create("default", 0, 2, 0, 4);
  for (uint64_t s = 0; s < 10; ++s) {
    const auto now = FlightRecorder::Clock::now();
    recorder->queued(s, now, "allreduce", "16 B float32 sum, direct", "direct", s == 9 ? "ddp bucket 0" : "", 4,
                     "Float", 16);
    recorder->started(s, now);
    if (s < 8) recorder->ended(s, now, nullptr);
  }
  recorder->ended(8, FlightRecorder::Clock::now(), "[rank 0/2] allreduce #8: timed out\nsecond line");
  const auto entries = recorder->entries();
  ASSERT_EQ(entries.size(), 4u);  // constant memory: only the last 4
  EXPECT_EQ(entries.front().sequence, 6u);
  EXPECT_EQ(entries[1].state, FlightEntry::State::kCompleted);
  EXPECT_EQ(entries[2].state, FlightEntry::State::kFailed);
  EXPECT_EQ(entries[2].error, "[rank 0/2] allreduce #8: timed out");  // the first line only
  EXPECT_EQ(entries[3].state, FlightEntry::State::kStarted);
  EXPECT_EQ(entries[3].label, "ddp bucket 0");
  EXPECT_GT(entries[3].started_us, 0);
  EXPECT_EQ(entries[3].ended_us, 0);
  recorder->ended(2, FlightRecorder::Clock::now(), nullptr);  // long overwritten: ignored
  recorder->refused();
  const json group = json::parse(recorder->to_json());
  EXPECT_EQ(group["operations"], 10);
  EXPECT_EQ(group["refused_after_break"], 1);
  EXPECT_EQ(group["process_rank"], 0);
  EXPECT_EQ(group["capacity"], 4);
  EXPECT_EQ(group["entries"].size(), 4u);
  EXPECT_EQ(group["entries"][3]["state"], "started");
}

TEST(FlightRecorder, LabelsNestAndEndWithTheirScope) {
  EXPECT_EQ(ScopedOperationLabel::current(), "");
  {
    ScopedOperationLabel outer("evaluate");
    {
      ScopedOperationLabel inner("ddp bucket 2");
      EXPECT_EQ(ScopedOperationLabel::current(), "ddp bucket 2");
    }
    EXPECT_EQ(ScopedOperationLabel::current(), "evaluate");
    std::string other_thread = "unset";
    std::thread([&] { other_thread = ScopedOperationLabel::current(); }).join();
    EXPECT_EQ(other_thread, "");  // per thread
  }
  EXPECT_EQ(ScopedOperationLabel::current(), "");
}

TEST(FlightRecorder, SizeComesFromTheEnvironment) {
  testing::ScopedEnvironment size("RINGTORCH_FLIGHT_RECORDER_SIZE", "0");
  EXPECT_EQ(FlightRecorder::capacity_from_environment(), 0u);
  size.set("many");
  EXPECT_NE(testing::error_of<InvalidArgumentError>([] {
              FlightRecorder::capacity_from_environment();
            }).find("RINGTORCH_FLIGHT_RECORDER_SIZE"),
            std::string::npos);
  size.set(std::nullopt);
  EXPECT_EQ(FlightRecorder::capacity_from_environment(), 512u);
}

// The default directory is this user's own and closed to others: made 0700, and one made by
// someone else (or left open) is refused with the reason, never written into.
TEST(FlightRecorder, TheDefaultDirectoryIsPrivateToTheUser) {
  TempDir tmp;
  testing::ScopedEnvironment tmpdir("TMPDIR", tmp.path());
  testing::ScopedEnvironment chosen("RINGTORCH_FLIGHT_RECORDER_DIR", std::nullopt);
  const std::string base = tmp.path() + "/ringtorch-flight-recorder-" + std::to_string(::geteuid());
  const std::string directory = flight_recorder_directory("run7", "");
  EXPECT_EQ(directory, base + "/run7");
  EXPECT_EQ(make_flight_recorder_directory(directory), "");
  struct stat st {};
  ASSERT_EQ(::stat(base.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(::stat(directory.c_str(), &st), 0);

  ASSERT_EQ(::chmod(base.c_str(), 0755), 0);  // as a shared /tmp directory was made before
  const std::string why = make_flight_recorder_directory(base + "/run8");
  EXPECT_NE(why.find("is not this user's private directory"), std::string::npos) << why;
  EXPECT_NE(why.find("mode 0755"), std::string::npos) << why;
  EXPECT_NE(::access((base + "/run8").c_str(), F_OK), 0) << "it wrote into an open directory";
  EXPECT_EQ(flight_recorder_directory("run7", "/var/log/job"), "/var/log/job/flight_recorder");
}

// Writes a dump file as a rank's process would.
void write_dump(const std::string& dir, int rank, const std::string& reason, const json& entries, int size = 3) {
  json file = {{"format", "ringtorch-flight-recorder"},
               {"version", 1},
               {"rank", rank},
               {"pid", 100 + rank},
               {"host", "h"},
               {"reason", reason},
               {"dumped_us", 1},
               {"groups", json::array({{{"group", "default"},
                                        {"rank", rank},
                                        {"size", size},
                                        {"capacity", 512},
                                        {"operations", entries.size()},
                                        {"entries", entries}}})}};
  std::ofstream(dir + "/rank" + std::to_string(rank) + ".json") << file.dump();
}

json entry(int sequence, const std::string& state, const std::string& detail = "4.0 MiB float32 sum, ring",
           const std::string& error = "") {
  json e = {{"sequence", sequence}, {"op", "allreduce"}, {"path", "ring"},
            {"detail", detail},     {"state", state},    {"label", "ddp bucket 3"}};
  if (!error.empty()) e["error"] = error;
  return e;
}

TEST(FlightAnalysis, NamesWhereEachRankStopped) {
  TempDir dir;
  // Ranks 0 and 1 wait in #512; rank 2 finished #511 and never called #512; rank 3 wrote nothing.
  write_dump(dir.path(), 0, "SIGUSR1", {entry(510, "completed"), entry(511, "completed"), entry(512, "started")}, 4);
  write_dump(dir.path(), 1, "SIGUSR1", {entry(511, "completed"), entry(512, "started")}, 4);
  write_dump(dir.path(), 2, "SIGUSR1", {entry(510, "completed"), entry(511, "completed")}, 4);
  const FlightAnalysis a = analyze_flight_dumps(dir.path());
  ASSERT_EQ(a.groups.size(), 1u);
  const auto& g = a.groups[0];
  ASSERT_EQ(g.ranks.size(), 4u);
  EXPECT_EQ(g.ranks[0].state, "in_operation");
  EXPECT_EQ(g.ranks[0].sequence, 512);
  EXPECT_EQ(g.ranks[0].label, "ddp bucket 3");
  EXPECT_EQ(g.ranks[1].state, "in_operation");
  EXPECT_EQ(g.ranks[2].state, "idle");
  EXPECT_EQ(g.ranks[2].last_completed, 511);
  EXPECT_EQ(g.ranks[3].state, "missing");
  EXPECT_FALSE(g.ranks[3].dumped);
  ASSERT_EQ(a.summary.size(), 3u);
  EXPECT_NE(a.summary[0].find("ranks 0,1 in allreduce #512 (4.0 MiB float32 sum, ring; ddp bucket 3)"),
            std::string::npos)
      << a.summary[0];
  EXPECT_NE(a.summary[1].find("rank 2 last completed #511, then called nothing more while others reached #512"),
            std::string::npos)
      << a.summary[1];
  EXPECT_NE(a.summary[2].find("rank 3 wrote no file"), std::string::npos) << a.summary[2];
  // The structured form says the same.
  const json j = json::parse(a.to_json());
  EXPECT_EQ(j["groups"][0]["ranks"][2]["state"], "idle");
  EXPECT_EQ(j["groups"][0]["ranks"][0]["sequence"], 512);
  EXPECT_EQ(j["summary"].size(), 3u);
}

TEST(FlightAnalysis, AFailureAndAMismatchAreSaidAsSuch) {
  TempDir dir;
  write_dump(dir.path(), 0, "PeerLostError in allreduce #7 of group default",
             {entry(6, "completed"),
              entry(7, "failed", "4.0 MiB float32 sum, ring",
                    "[rank 0/2] allreduce #7 (group default, 4.0 MiB): lost a peer: rank 1"),
              entry(8, "failed", "4.0 MiB float32 sum, ring", "the group was broken by an earlier failure")},
             2);
  FlightAnalysis a = analyze_flight_dumps(dir.path());
  ASSERT_EQ(a.summary.size(), 2u);
  EXPECT_NE(a.summary[0].find("rank 0 failed in allreduce #7 (4.0 MiB float32 sum, ring; ddp bucket 3): lost a peer: "
                              "rank 1"),
            std::string::npos)
      << a.summary[0];
  EXPECT_NE(a.summary[1].find("rank 1 wrote no file"), std::string::npos);

  TempDir mismatch;
  write_dump(mismatch.path(), 0, "MismatchError", json::array({entry(0, "failed", "16 B float32 sum, direct", "x")}),
             2);
  write_dump(mismatch.path(), 1, "MismatchError", json::array({entry(0, "failed", "32 B float64 sum, direct", "x")}),
             2);
  a = analyze_flight_dumps(mismatch.path());
  ASSERT_EQ(a.summary.size(), 1u);
  EXPECT_NE(a.summary[0].find("ranks 0,1 failed at operation #0, where the calls differ: rank 0 called allreduce (16 B "
                              "float32 sum, direct); rank 1 called allreduce (32 B float64 sum, direct)"),
            std::string::npos)
      << a.summary[0];
}

TEST(FlightAnalysis, AFailureTheProgramWentOnFromIsNotWhereItStands) {
  TempDir dir;
  // A mismatch at #1, caught; #2 and #3 completed after it.
  write_dump(dir.path(), 0, "SIGUSR1",
             {entry(0, "completed"), entry(1, "failed", "16 B float32 sum, direct", "mismatch"), entry(2, "completed"),
              entry(3, "completed")},
             1);
  const FlightAnalysis a = analyze_flight_dumps(dir.path());
  const auto& r = a.groups[0].ranks[0];
  EXPECT_EQ(r.state, "idle");
  EXPECT_EQ(r.last_completed, 3);
  EXPECT_EQ(r.earlier_failures, 1);
  EXPECT_NE(a.summary[0].find("every rank completed operation #3"), std::string::npos) << a.summary[0];
  // Files older than a launcher's round are left out.
  EXPECT_NE(testing::error_of<IoError>([&] {
              analyze_flight_dumps(dir.path(), /*since_us=*/2);
            }).find("no flight-recorder file"),
            std::string::npos);
}

TEST(FlightAnalysis, RefusesWhatIsNotADumpDirectory) {
  TempDir dir;
  EXPECT_NE(testing::error_of<IoError>([&] { analyze_flight_dumps(dir.path()); }).find("no flight-recorder file"),
            std::string::npos);
  EXPECT_NE(testing::error_of<IoError>([&] { analyze_flight_dumps(dir.file("absent")); }).find("is not a directory"),
            std::string::npos);
  std::ofstream(dir.file("rank0.json")) << "{\"format\": \"something else\"}";
  EXPECT_NE(testing::error_of<IoError>([&] { analyze_flight_dumps(dir.path()); }).find("is not a flight-recorder file"),
            std::string::npos);
}

// Real groups: a mismatch between thread ranks makes every rank write its file, names it in
// the error, and the analysis names both calls.
TEST(FlightRecorder, AMismatchDumpsEveryRankAndTheErrorSaysWhere) {
  TempDir dir;
  DumpDirectory env(dir.path());
  std::vector<std::string> errors(2);
  testing::on_thread_ranks(2, [&](ProcessGroup& group) {
    at::Tensor ok = at::ones({8});
    group.allreduce(ok);
    at::Tensor t = group.rank() == 0 ? at::ones({4}) : at::ones({4}, at::kDouble);
    errors[group.rank()] = testing::error_of<MismatchError>([&] { group.allreduce(t); });
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("flight recorder: " + dir.path()), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("ringtrace " + dir.path()), std::string::npos) << errors[r];
  }
  const FlightAnalysis a = analyze_flight_dumps(dir.path());
  ASSERT_FALSE(a.groups.empty());
  const auto& g = a.groups[0];
  ASSERT_EQ(g.ranks.size(), 2u);
  for (const auto& r : g.ranks) {
    EXPECT_TRUE(r.dumped);
    EXPECT_EQ(r.state, "failed");
    EXPECT_EQ(r.sequence, 1);
    EXPECT_EQ(r.last_completed, 0);
    EXPECT_EQ(r.op, "allreduce");
  }
  EXPECT_NE(g.ranks[0].detail.find("float32"), std::string::npos);
  EXPECT_NE(g.ranks[1].detail.find("float64"), std::string::npos);
  EXPECT_NE(a.summary[0].find("where the calls differ"), std::string::npos) << a.summary[0];
}

TEST(Timeline, RecordsSpansInABoundedWindowAsAChromeTrace) {
  Timeline::clear();
  Timeline::start(5);
  Timeline::name_this_thread("test thread");
  for (int i = 0; i < 8; ++i) {
    TimelineSpan span("step", "train");
    span.set_args("{\"step\":" + std::to_string(i) + "}");
  }
  const auto now = Timeline::Clock::now();
  Timeline::record_on_lane(Timeline::kFirstLane, "bucket 0", "ddp", now, now + std::chrono::microseconds(50));
  Timeline::name_lane(Timeline::kFirstLane, "ddp bucket 0");
  Timeline::stop();
  { TimelineSpan off("not recorded", "train"); }
  size_t dropped = 0;
  const auto events = Timeline::events(&dropped);
  ASSERT_EQ(events.size(), 5u);  // the newest 5 of 9
  EXPECT_EQ(dropped, 4u);
  EXPECT_EQ(events.back().name, "bucket 0");
  EXPECT_EQ(events.back().duration_us, 50);
  const json trace = json::parse(Timeline::chrome_trace_json());
  ASSERT_TRUE(trace["traceEvents"].is_array());
  int spans = 0;
  bool thread_named = false, lane_named = false;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") {
      ++spans;
      EXPECT_TRUE(e.contains("ts") && e.contains("dur") && e.contains("pid") && e.contains("tid"));
    }
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      thread_named |= e["args"]["name"] == "test thread";
      lane_named |= e["args"]["name"] == "ddp bucket 0" && e["tid"] == Timeline::kFirstLane;
    }
  }
  EXPECT_EQ(spans, 5);
  EXPECT_TRUE(thread_named);
  EXPECT_TRUE(lane_named);
  EXPECT_EQ(trace["otherData"]["ringtorch_dropped_events"], 4);
  Timeline::start(5);
  {
    TimelineSpan bad("step", "train");
    bad.set_args("{not json");
  }
  Timeline::stop();
  const json again = json::parse(Timeline::chrome_trace_json());  // still valid JSON
  EXPECT_EQ(again["traceEvents"].back()["args"]["text"], "{not json");
  EXPECT_FALSE(trace["traceEvents"].back().contains("args")) << trace["traceEvents"].back();  // the lane span had none
  Timeline::clear();
}

TEST(Launcher, AsksOnlyProcessesThatCatchTheSignal) {
  // SIGUSR2 here: SIGUSR1 is the flight recorder's once a group exists in this test process.
  EXPECT_FALSE(process_catches_signal(::getpid(), SIGUSR2));
  struct sigaction action {
  }, previous{};
  action.sa_handler = [](int) {};
  ::sigaction(SIGUSR2, &action, &previous);
  EXPECT_TRUE(process_catches_signal(::getpid(), SIGUSR2));
  ::sigaction(SIGUSR2, &previous, nullptr);
  EXPECT_FALSE(process_catches_signal(999999999, SIGUSR2)) << "no such process";
}

TEST(Timeline, MergesRanksSortedByTime) {
  const std::string a = R"({"traceEvents":[{"name":"process_name","ph":"M","pid":0,"args":{"name":"rank 0"}},
      {"name":"step","ph":"X","ts":30,"dur":5,"pid":0,"tid":0}],"otherData":{"ringtorch_dropped_events":2}})";
  const std::string b = R"({"traceEvents":[{"name":"step","ph":"X","ts":10,"dur":5,"pid":1,"tid":0},
      {"name":"process_name","ph":"M","pid":1,"args":{"name":"rank 1"}}]})";
  size_t events = 0;
  const json merged = json::parse(merge_chrome_trace_texts({a, b}, {"a", "b"}, &events));
  EXPECT_EQ(events, 4u);
  const auto& e = merged["traceEvents"];
  EXPECT_EQ(e[0]["ph"], "M");
  EXPECT_EQ(e[1]["ph"], "M");
  EXPECT_EQ(e[2]["ts"], 10);
  EXPECT_EQ(e[3]["ts"], 30);
  EXPECT_EQ(merged["otherData"]["ringtorch_dropped_events"], 2);
  EXPECT_NE(testing::error_of<IoError>([] {
              merge_chrome_trace_texts({"[1,2]"}, {"of rank 3"});
            }).find("of rank 3: not a Chrome trace"),
            std::string::npos);
}

TEST(Timeline, CollectivesAppearWithTheirPathAndBytes) {
  Timeline::clear();
  Timeline::start();
  testing::on_thread_ranks(2, [](ProcessGroup& group) {
    ScopedOperationLabel label("test bucket");
    at::Tensor t = at::ones({1024});
    group.allreduce(t);
  });
  Timeline::stop();
  int allreduces = 0;
  for (const auto& e : Timeline::events()) {
    if (e.name != "allreduce") continue;
    ++allreduces;
    const json args = json::parse(e.args);
    EXPECT_EQ(args["bytes"], 4096);
    EXPECT_EQ(args["label"], "test bucket");
    EXPECT_FALSE(args["path"].get<std::string>().empty());
    EXPECT_EQ(std::string(e.category), "collective");
  }
  EXPECT_EQ(allreduces, 2);  // one per rank (threads of this process)
  Timeline::clear();
}

}  // namespace
}  // namespace ringtorch
