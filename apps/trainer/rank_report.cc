#include "apps/trainer/rank_report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include <ringtorch/error.h>
#include <ringtorch/process_group.h>

namespace ringtorch {

RankTimes& RankTimes::operator+=(const RankTimes& other) {
  compute_seconds += other.compute_seconds;
  wait_seconds += other.wait_seconds;
  loop_seconds += other.loop_seconds;
  samples += other.samples;
  steps += other.steps;
  return *this;
}

std::vector<RankTimes> gather_rank_times(ProcessGroup& group, const RankTimes& mine) {
  constexpr int kFields = 5;
  double local[kFields] = {mine.compute_seconds, mine.wait_seconds, mine.loop_seconds,
                           static_cast<double>(mine.samples), static_cast<double>(mine.steps)};
  std::vector<double> all(static_cast<size_t>(kFields * group.size()));
  group.allgather(local, all.data(), kFields, c10::ScalarType::Double);
  std::vector<RankTimes> ranks(static_cast<size_t>(group.size()));
  for (size_t r = 0; r < ranks.size(); ++r) {
    ranks[r].compute_seconds = all[r * kFields];
    ranks[r].wait_seconds = all[r * kFields + 1];
    ranks[r].loop_seconds = all[r * kFields + 2];
    ranks[r].samples = static_cast<int64_t>(all[r * kFields + 3]);
    ranks[r].steps = static_cast<int64_t>(all[r * kFields + 4]);
  }
  return ranks;
}

std::string format_rank_table(const std::string& title, const std::vector<RankTimes>& ranks) {
  const std::string head = str_cat("[ringtorch] ", title, ", per rank:");
  char line[256];
  std::snprintf(line, sizeof(line), "%s %5s %9s %6s %10s %10s %12s\n", head.c_str(), "rank", "samples", "steps",
                "samples/s", "compute s", "comm wait s");
  std::string text = line;
  const std::string pad(head.size() - std::string("[ringtorch]").size(), ' ');
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::snprintf(line, sizeof(line), "[ringtorch]%s %5zu %9lld %6lld %10.1f %10.2f %12.2f\n", pad.c_str(), r,
                  static_cast<long long>(ranks[r].samples), static_cast<long long>(ranks[r].steps),
                  ranks[r].samples_per_second(), ranks[r].compute_seconds, ranks[r].wait_seconds);
    text += line;
  }
  // The slowest rank is the one that computes longest per sample; the others wait for it. Ranks
  // that trained nothing (sitting out, --balance auto) are not compared.
  auto per_sample = [](const RankTimes& t) { return t.compute_seconds / static_cast<double>(t.samples); };
  std::vector<size_t> trained;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].samples > 0) trained.push_back(r);
  }
  if (trained.size() > 1) {
    size_t slowest = trained[0], fastest = trained[0];
    for (size_t r : trained) {
      if (per_sample(ranks[r]) > per_sample(ranks[slowest])) slowest = r;
      if (per_sample(ranks[r]) < per_sample(ranks[fastest])) fastest = r;
    }
    double most_waited = 0;
    for (size_t r : trained) {
      if (r != slowest) most_waited = std::max(most_waited, ranks[r].wait_seconds);
    }
    const double ratio = per_sample(ranks[fastest]) > 0 ? per_sample(ranks[slowest]) / per_sample(ranks[fastest]) : 1;
    std::snprintf(line, sizeof(line),
                  "[ringtorch] slowest: rank %zu (%.2f ms of compute per sample, %.2fx the fastest, rank %zu); the "
                  "others waited up to %.2f s\n",
                  slowest, per_sample(ranks[slowest]) * 1e3, ratio, fastest, most_waited);
    text += line;
  }
  return text;
}

std::string rank_times_json(const std::vector<RankTimes>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t r = 0; r < ranks.size(); ++r) {
    out.push_back({{"rank", r},
                   {"samples", ranks[r].samples},
                   {"steps", ranks[r].steps},
                   {"samples_per_s", ranks[r].samples_per_second()},
                   {"compute_s", ranks[r].compute_seconds},
                   {"comm_wait_s", ranks[r].wait_seconds}});
  }
  return out.dump();
}

}  // namespace ringtorch
