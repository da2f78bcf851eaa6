#include <ringtorch/error.h>
#include <ringtorch/join.h>

#include "rendezvous/store_wait.h"

namespace ringtorch {
namespace {

std::string member_list(const std::vector<int>& members) {
  std::string out;
  for (size_t i = 0; i < members.size() && i < 16; ++i) out += (i ? ", " : "") + std::to_string(members[i]);
  if (members.size() > 16) out += str_cat(" and ", members.size() - 16, " more");
  return out;
}

// Waits for keys "<prefix><m>" of every member m; on timeout names the missing members.
void wait_for_members(c10d::Store& store, const std::string& prefix, const MemberContext& who,
                      std::chrono::milliseconds timeout, const std::string& stage) {
  std::vector<std::string> keys;
  keys.reserve(who.group_size);
  for (int m = 0; m < who.group_size; ++m) keys.push_back(prefix + std::to_string(m));
  auto missing_keys = wait_until_keys_exist(store, keys, std::chrono::steady_clock::now() + timeout);
  if (missing_keys.empty()) return;
  std::vector<int> missing;
  missing.reserve(missing_keys.size());
  for (const auto& k : missing_keys) missing.push_back(std::stoi(k.substr(prefix.size())));
  throw TimeoutError(
      str_cat(member_prefix(who), who.operation, ": ", stage, " timed out after ", format_duration_ms(timeout.count()),
              ": ", who.group_size - missing.size(), " of ", who.group_size, " ", who.noun, "s arrived; missing ",
              who.noun, missing.size() == 1 ? " " : "s ", member_list(missing),
              " (not started, crashed, or pointed at another store: check their logs); ", kRaiseTimeoutHint));
}

}  // namespace

std::string member_prefix(const MemberContext& who) {
  return str_cat("[", who.noun, " ", who.member, "/", who.group_size, "] ");
}

int join_round(c10d::Store& scope, const MemberContext& who, std::chrono::milliseconds timeout) {
  const int64_t joins = scope.add("joins", 1);
  const int round = static_cast<int>((joins - 1) / who.group_size);
  const std::string members = str_cat("round/", round, "/", who.noun, "/");
  const int64_t seen = scope.add(members + std::to_string(who.member), 1);
  if (seen != 1) {
    throw InvalidArgumentError(
        str_cat(member_prefix(who), who.operation, ": ", who.noun, " ", who.member, " joined round ", round,
                " twice. Either two processes were given the same ", who.noun,
                " (check RANK / --node_rank), or an earlier job with the same run id crashed while joining "
                "and left its keys: use a new run id (RINGTORCH_RUN_ID or ringrun --run_id), a fresh file:// path, "
                "or another Redis db"));
  }
  wait_for_members(scope, members, who, timeout, str_cat("waiting for all ", who.noun, "s to join"));
  return round;
}

void store_barrier(c10d::Store& store, const std::string& name, const MemberContext& who,
                   std::chrono::milliseconds timeout) {
  const std::string prefix = "barrier/" + name + "/";
  store.set(prefix + std::to_string(who.member), {'1'});
  wait_for_members(store, prefix, who, timeout, "barrier '" + name + "'");
}

void leave_barrier(c10d::Store& store, const std::string& name, const MemberContext& who,
                   std::chrono::milliseconds timeout) {
  store_barrier(store, name, who, timeout);
  const std::string prefix = "left/" + name + "/";
  store.set(prefix + std::to_string(who.member), {'1'});
  if (who.member == 0) wait_for_members(store, prefix, who, timeout, "leaving '" + name + "'");
}

}  // namespace ringtorch
