#include "runtime/trace/flight_analysis.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include <ringtorch/error.h>

namespace ringtorch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// "rank<digits>.json" (std::regex is avoided: GCC 12 warns inside it under ASan).
bool is_dump_file_name(const std::string& name) {
  const std::string prefix = "rank", suffix = ".json";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  for (size_t k = prefix.size(); k < name.size() - suffix.size(); ++k) {
    if (name[k] < '0' || name[k] > '9') return false;
  }
  return true;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
  return out;
}

FlightAnalysis::RankState read_rank(const json& group, const std::string& reason) {
  FlightAnalysis::RankState state;
  state.rank = group.at("rank").get<int>();
  state.dumped = true;
  state.reason = reason;
  const json& entries = group.at("entries");
  // The newest completed operation; what follows it is where the rank stands.
  size_t first_after = 0;
  for (size_t k = 0; k < entries.size(); ++k) {
    if (entries[k].at("state").get<std::string>() == "completed") {
      state.last_completed = entries[k].at("sequence").get<int64_t>();
      first_after = k + 1;
    }
  }
  for (size_t k = 0; k < first_after; ++k) {
    if (entries[k].at("state").get<std::string>() == "failed") ++state.earlier_failures;
  }
  if (first_after >= entries.size()) {
    state.state = "idle";
    return state;
  }
  const json& e = entries[first_after];
  state.sequence = e.at("sequence").get<int64_t>();
  state.op = e.value("op", "");
  state.detail = e.value("detail", "");
  state.path = e.value("path", "");
  state.label = e.value("label", "");
  state.error = e.value("error", "");
  state.state = e.at("state").get<std::string>() == "failed" ? "failed" : "in_operation";
  return state;
}

// The error without the "[rank 0/2] allreduce #3 (group default, ...): " the line already says.
std::string without_context(const std::string& error) {
  std::string text = error;
  if (text.rfind("[rank ", 0) == 0) {
    const size_t end = text.find("): ");
    if (end != std::string::npos) text = text.substr(end + 3);
  }
  return text.size() > 240 ? text.substr(0, 240) + " ..." : text;  // the file keeps the whole line
}

std::string describe_operation(const FlightAnalysis::RankState& r) {
  std::string text = str_cat(r.op, " #", r.sequence, " (", r.detail);
  if (!r.label.empty()) text += "; " + r.label;
  return text + ")";
}

// One line per situation: ranks that stand at the same place are named together.
std::vector<std::string> findings_of(const FlightAnalysis::Group& g) {
  std::vector<std::string> lines;
  const std::string prefix = str_cat("group '", g.name, "': ");
  int64_t furthest = -1;  // the highest operation any rank reached
  for (const auto& r : g.ranks) furthest = std::max({furthest, r.sequence, r.last_completed});
  // failed / in_operation, grouped by (state, sequence)
  std::map<std::pair<std::string, int64_t>, std::vector<int>> together;
  for (const auto& r : g.ranks) {
    if (r.state == "failed" || r.state == "in_operation") together[{r.state, r.sequence}].push_back(r.rank);
  }
  for (const auto& [key, ranks] : together) {
    const auto& first = g.ranks[static_cast<size_t>(ranks[0])];
    if (key.first == "failed") {
      // Different calls at the same sequence number: a mismatch; name each rank's call.
      bool differ = false;
      for (int r : ranks) {
        const auto& other = g.ranks[static_cast<size_t>(r)];
        differ |= other.detail != first.detail || other.op != first.op;
      }
      std::string line = differ ? str_cat(prefix, rank_list(ranks), " failed at operation #", first.sequence)
                                : str_cat(prefix, rank_list(ranks), " failed in ", describe_operation(first));
      if (differ) {
        line += ", where the calls differ:";
        for (int r : ranks)
          line += str_cat(" rank ", r, " called ", g.ranks[static_cast<size_t>(r)].op, " (",
                          g.ranks[static_cast<size_t>(r)].detail, ");");
        line.pop_back();
      }
      if (!differ && !first.error.empty()) line += str_cat(": ", without_context(first.error));
      lines.push_back(line);
    } else {
      lines.push_back(str_cat(prefix, rank_list(ranks), " in ", describe_operation(first),
                              ", not finished when the file was written"));
    }
  }
  std::vector<int> behind;  // idle ranks that never called what others reached
  for (const auto& r : g.ranks) {
    if (r.state == "idle" && r.last_completed < furthest) behind.push_back(r.rank);
  }
  for (int rank : behind) {
    const auto& r = g.ranks[static_cast<size_t>(rank)];
    lines.push_back(str_cat(prefix, "rank ", rank, " last completed ",
                            r.last_completed >= 0 ? str_cat("#", r.last_completed) : std::string("nothing"),
                            ", then called nothing more while others reached #", furthest,
                            ": it is busy or stuck outside ringtorch (or it finished its loop early)"));
  }
  std::vector<int> missing;
  for (const auto& r : g.ranks) {
    if (!r.dumped) missing.push_back(r.rank);
  }
  if (!missing.empty()) {
    lines.push_back(str_cat(prefix, rank_list(missing),
                            " wrote no file: ", missing.size() == 1 ? "its process" : "their processes",
                            " ended before ringtorch could write one (killed, crashed, out of memory, or "
                            "finished), never failed nor got SIGUSR1 (kill -USR1 <pid>), or wrote it on another host"));
  }
  if (lines.empty())
    lines.push_back(str_cat(prefix, "every rank completed operation #", furthest, "; nothing pending"));
  return lines;
}

}  // namespace

FlightAnalysis analyze_flight_dumps(const std::string& directory, int64_t since_us) {
  FlightAnalysis analysis;
  analysis.directory = directory;
  std::error_code ec;
  if (!fs::is_directory(directory, ec)) {
    throw IoError(str_cat("ringtrace: ", directory, " is not a directory of flight-recorder files"));
  }
  std::map<std::string, FlightAnalysis::Group> groups;
  for (const auto& entry : fs::directory_iterator(directory)) {
    const std::string name = entry.path().filename().string();
    if (!is_dump_file_name(name)) continue;
    std::ifstream in(entry.path());
    json file = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (file.is_discarded() || !file.is_object() || file.value("format", "") != "ringtorch-flight-recorder") {
      throw IoError(str_cat("ringtrace: ", entry.path().string(), " is not a flight-recorder file"));
    }
    if (file.value("dumped_us", int64_t{0}) < since_us) continue;  // an earlier round's
    analysis.files.push_back(entry.path().string());
    try {
      for (const json& g : file.at("groups")) {
        FlightAnalysis::Group& group = groups[g.at("group").get<std::string>()];
        group.name = g.at("group").get<std::string>();
        group.size = std::max(group.size, g.at("size").get<int>());
        group.ranks.push_back(read_rank(g, file.value("reason", "")));
      }
    } catch (const json::exception& e) {
      throw IoError(str_cat("ringtrace: ", entry.path().string(), ": ", e.what()));
    }
  }
  if (analysis.files.empty()) {
    throw IoError(str_cat("ringtrace: no flight-recorder file (rank<N>.json) in ", directory));
  }
  std::sort(analysis.files.begin(), analysis.files.end());
  for (auto& [name, group] : groups) {
    std::vector<FlightAnalysis::RankState> by_rank(static_cast<size_t>(group.size));
    for (int r = 0; r < group.size; ++r) {
      by_rank[static_cast<size_t>(r)].rank = r;
      by_rank[static_cast<size_t>(r)].state = "missing";
    }
    for (auto& r : group.ranks) {
      if (r.rank >= 0 && r.rank < group.size) by_rank[static_cast<size_t>(r.rank)] = r;
    }
    group.ranks = std::move(by_rank);
    group.findings = findings_of(group);
  }
  // The whole group (the one without a '.' in its name, the largest) first.
  for (auto& [name, group] : groups) analysis.groups.push_back(std::move(group));
  std::stable_sort(analysis.groups.begin(), analysis.groups.end(),
                   [](const FlightAnalysis::Group& a, const FlightAnalysis::Group& b) { return a.size > b.size; });
  for (const auto& g : analysis.groups) {
    analysis.summary.insert(analysis.summary.end(), g.findings.begin(), g.findings.end());
  }
  return analysis;
}

std::string FlightAnalysis::to_json() const {
  json out = {{"directory", directory}, {"files", files}, {"summary", summary}, {"groups", json::array()}};
  for (const auto& g : groups) {
    json group = {{"group", g.name}, {"size", g.size}, {"findings", g.findings}, {"ranks", json::array()}};
    for (const auto& r : g.ranks) {
      json rank = {{"rank", r.rank},
                   {"dumped", r.dumped},
                   {"state", r.state},
                   {"last_completed", r.last_completed},
                   {"earlier_failures", r.earlier_failures}};
      if (r.sequence >= 0) {
        rank["sequence"] = r.sequence;
        rank["op"] = r.op;
        rank["detail"] = r.detail;
        rank["path"] = r.path;
        if (!r.label.empty()) rank["label"] = r.label;
        if (!r.error.empty()) rank["error"] = r.error;
      }
      if (!r.reason.empty()) rank["reason"] = r.reason;
      group["ranks"].push_back(std::move(rank));
    }
    out["groups"].push_back(std::move(group));
  }
  return out.dump(1);
}

std::string FlightAnalysis::to_text() const {
  std::string text =
      str_cat("flight recorder: ", files.size(), " file", files.size() == 1 ? "" : "s", " in ", directory, "\n");
  for (const auto& line : summary) text += "  " + line + "\n";
  return text;
}

}  // namespace ringtorch
