#include "runtime/comm/failure_report.h"

#include <cctype>
#include <future>
#include <sstream>
#include <thread>
#include <vector>

#include <ringtorch/error.h>

#include "rendezvous/store_value.h"
#include "rendezvous/store_wait.h"

namespace ringtorch {
namespace {

std::string peers_key(int rank) { return str_cat("peers/", rank); }
std::string failures_key(int rank) { return str_cat("failures/", rank); }

// Line `line` of a peers/<rank> value: that rank's address on its pair with rank `line`.
std::string address_line(const std::string& text, int line) {
  std::istringstream in(text);
  std::string address;
  for (int i = 0; i <= line && std::getline(in, address); ++i) {
    if (i == line) return address;
  }
  return "";
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

FailedPeer lookup(c10d::Store& store, int rank, int size, const std::string& peer_address, const std::string& what,
                  std::chrono::milliseconds window) {
  store.set(failures_key(rank), store_value(what));
  // Each peer's address for its pair with this rank, as Gloo prints it in its messages.
  std::vector<std::string> address(size);
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank && store.check({peers_key(peer)})) {
      address[peer] = published_peer_address(store, peer, rank);
    }
  }
  const int named = peer_named_by_address(address, rank, peer_address);  // the peer Gloo's failure names
  std::string lead;                                                      // what is known before the roll call
  if (named >= 0) {
    lead = str_cat("peer rank ", named, " (", address[named], ")");
    // A peer that failed first and exited closes its connections too: then it is not the cause.
    if (!store.check({failures_key(named)})) return {named, lead};
    if (size == 2) return {named, lead + " failed first"};
    lead += " closed the connection after failing itself; ";
  } else if (size == 2) {
    const int peer = 1 - rank;
    return {peer, str_cat("peer rank ", peer, address[peer].empty() ? "" : " (" + address[peer] + ")")};
  }
  // Roll call: the ranks that do not report a failure within the window are the suspects.
  const auto deadline = std::chrono::steady_clock::now() + window;
  std::vector<int> silent;
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank) silent.push_back(peer);
  }
  std::string cut_short;  // why the roll call ended early, if it did
  while (!silent.empty() && std::chrono::steady_clock::now() < deadline) {
    std::vector<int> still;
    try {
      for (int peer : silent) {
        if (!store.check({failures_key(peer)})) still.push_back(peer);
      }
    } catch (const std::exception& e) {
      // The store's host may be a rank that has reported and exited: keep what was learned.
      cut_short = e.what();
      break;
    }
    silent.swap(still);
    if (!silent.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (silent.empty()) return {-1, lead + "peer unknown: every other rank reported a failure too"};
  std::string where;
  for (int peer : silent) {
    if (address[peer].empty()) continue;
    where += silent.size() == 1 ? str_cat("at ", address[peer])
                                : str_cat(where.empty() ? "" : ", ", "rank ", peer, " at ", address[peer]);
  }
  return {silent.size() == 1 ? silent[0] : -1,
          str_cat(lead, silent.size() == 1 ? "peer rank " : "peer ranks ", join_ranks(silent),
                  where.empty() ? "" : " (" + where + ")", " did not report a failure ",
                  cut_short.empty() ? "within " + format_duration_ms(window.count())
                                    : "before the store stopped answering (" + cut_short + ")",
                  ": died, stopped, or not calling this collective")};
}

// "[host]" of "[host]:port"; empty when there is no bracketed host.
std::string host_part(const std::string& address) {
  const size_t close = address.rfind(']');
  return address.empty() || address[0] != '[' || close == std::string::npos ? "" : address.substr(0, close + 1);
}

}  // namespace

int peer_named_by_address(const std::vector<std::string>& published, int rank, const std::string& named) {
  if (named.empty()) return -1;
  for (size_t peer = 0; peer < published.size(); ++peer) {
    if (published[peer] == named) return static_cast<int>(peer);
  }
  // Gloo may name the port the peer listened on during set-up, not the one it published.
  const std::string host = host_part(named);
  if (host.empty()) return -1;
  for (size_t peer = 0; peer < published.size(); ++peer) {
    if (static_cast<int>(peer) != rank && published[peer].empty()) return -1;  // it may be that peer
  }
  int on_host = -1;
  for (size_t peer = 0; peer < published.size(); ++peer) {
    if (static_cast<int>(peer) == rank || host_part(published[peer]) != host) continue;
    if (on_host >= 0) return -1;  // several peers on that host: only the port could tell
    on_host = static_cast<int>(peer);
  }
  return on_host;
}

std::string published_peer_address(c10d::Store& store, int peer, int rank) {
  return address_line(store_text(store.get(peers_key(peer))), rank);
}

void publish_peer_addresses(c10d::Store& store, gloo::Context& context) {
  std::string lines;
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer != context.rank) lines += context.getPair(peer)->address().str();
    lines += "\n";
  }
  store.set(peers_key(context.rank), store_value(lines));
}

FailedPeer name_failed_peer(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                            const std::string& peer_address, const std::string& what,
                            std::chrono::milliseconds window) {
  // A detached helper, so that a store that does not answer (its host stopped) cannot hold the
  // failing operation: the promise is abandoned after the window and the thread exits whenever
  // the store lets it.
  auto answer = std::make_shared<std::promise<FailedPeer>>();
  std::future<FailedPeer> result = answer->get_future();
  std::thread([=] {
    try {
      answer->set_value(lookup(*store, rank, size, peer_address, what, window));
    } catch (const std::exception& e) {
      answer->set_value({-1, str_cat("peer unknown: the store failed (", e.what(), ")")});
    }
  }).detach();
  if (result.wait_for(window + kReportSlack) != std::future_status::ready) {
    return {-1, str_cat("peer unknown: the store did not answer within ",
                        format_duration_ms((window + kReportSlack).count()))};
  }
  return result.get();
}

std::exception_ptr operation_failure(ErrorKind kind, const std::string& description, const std::string& cause,
                                     const std::string& peer_clause, std::chrono::milliseconds timeout,
                                     FailureSite site) {
  const bool timed_out = kind == ErrorKind::kTimeout;
  const std::string message =
      str_cat(description, timed_out ? " timed out" : " lost a peer", " after at most ",
              format_duration_ms(timeout.count()), ": ", cause, peer_clause.empty() ? "" : "; " + peer_clause,
              timed_out ? "; a rank stopped, died, or did not call this collective (all ranks must call the same "
                          "collectives in the same order); "
                        : "; a peer process died or its connection broke: check the other ranks' logs; ",
              "the group is now broken: recreate it; ", kRaiseTimeoutHint);
  return make_error(timed_out ? ErrorKind::kTimeout : ErrorKind::kPeerLost, message, std::move(site));
}

}  // namespace ringtorch
