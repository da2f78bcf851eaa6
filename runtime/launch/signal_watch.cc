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
std::mutex g_mutex;  // guards what follows
int g_watches = 0;
struct sigaction g_previous[3];
bool g_installed[3];

void record(int sig) {
  g_last.store(sig);
  g_arrivals.fetch_add(1);
}

}  // namespace

SignalWatch::SignalWatch() {
  std::lock_guard<std::mutex> lock(g_mutex);
  arrivals_at_start_ = g_arrivals.load();
  if (g_watches++ > 0) return;
  struct sigaction action {};
  action.sa_handler = record;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < 3; ++i) {
    ::sigaction(kWatched[i], nullptr, &g_previous[i]);
    g_installed[i] = g_previous[i].sa_handler != SIG_IGN;
    if (g_installed[i]) ::sigaction(kWatched[i], &action, nullptr);
  }
}

SignalWatch::~SignalWatch() { end(); }

int SignalWatch::received() const { return g_arrivals.load() != arrivals_at_start_ ? g_last.load() : 0; }

void SignalWatch::end() {
  if (ended_) return;
  ended_ = true;
  std::lock_guard<std::mutex> lock(g_mutex);
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
