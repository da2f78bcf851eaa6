#include "runtime/launch/signal_watch.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace ringtorch {
namespace {

constexpr int kWatched[] = {SIGINT, SIGTERM, SIGHUP};

std::atomic<uint64_t> g_arrivals{0};
std::atomic<int> g_last{0};
std::atomic<uint64_t> g_dump_requests{0};  // SIGUSR1s
std::mutex g_mutex;                        // guards what follows
int g_watches = 0, g_dump_watches = 0;
struct sigaction g_previous[3], g_previous_usr1;
bool g_installed[3];

void record(int sig) {
  g_last.store(sig);
  g_arrivals.fetch_add(1);
}

void record_dump_request(int) { g_dump_requests.fetch_add(1); }

struct sigaction handler(void (*function)(int)) {
  struct sigaction action {};
  action.sa_handler = function;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  return action;
}

}  // namespace

SignalWatch::SignalWatch(bool dump_requests) : dump_requests_(dump_requests) {
  std::lock_guard<std::mutex> lock(g_mutex);
  arrivals_at_start_ = g_arrivals.load();
  dump_requests_seen_ = g_dump_requests.load();
  if (dump_requests_ && g_dump_watches++ == 0) {
    const struct sigaction action = handler(record_dump_request);
    ::sigaction(SIGUSR1, &action, &g_previous_usr1);
  }
  if (g_watches++ > 0) return;
  const struct sigaction action = handler(record);
  for (int i = 0; i < 3; ++i) {
    ::sigaction(kWatched[i], nullptr, &g_previous[i]);
    g_installed[i] = g_previous[i].sa_handler != SIG_IGN;
    if (g_installed[i]) ::sigaction(kWatched[i], &action, nullptr);
  }
}

bool SignalWatch::dump_requested() {
  const uint64_t now = g_dump_requests.load();
  if (!dump_requests_ || now == dump_requests_seen_) return false;
  dump_requests_seen_ = now;
  return true;
}

SignalWatch::~SignalWatch() { end(); }

int SignalWatch::received() const { return g_arrivals.load() != arrivals_at_start_ ? g_last.load() : 0; }

void SignalWatch::end() {
  if (ended_) return;
  ended_ = true;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (dump_requests_ && --g_dump_watches == 0) ::sigaction(SIGUSR1, &g_previous_usr1, nullptr);
  if (--g_watches > 0) return;
  for (int i = 0; i < 3; ++i) {
    if (g_installed[i]) ::sigaction(kWatched[i], &g_previous[i], nullptr);
  }
}

void SignalWatch::take_signal(int sig) {
  end();
  ::kill(::getpid(), sig);
}

}  // namespace ringtorch
