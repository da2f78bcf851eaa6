// ringrun: torchrun's launcher for ringtorch programs. All logic is in runtime/launch/.
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <ringtorch/error.h>
#include <ringtorch/timeline.h>

#include "runtime/launch/launch_agent.h"
#include "runtime/launch/launch_config.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  ringtorch::LaunchConfig config;
  try {
    bool help = false;
    config = ringtorch::parse_launch_args(args, &help);
    if (help) {
      std::fputs(ringtorch::launch_usage().c_str(), stdout);
      return 0;
    }
  } catch (const ringtorch::Error& e) {
    std::fprintf(stderr, "ringrun: %s\n", e.what());
    return 2;
  }
  try {
    ringtorch::take_redis_password(config);
    // RINGTORCH_TIMELINE names the file ringrun merges the workers' timelines into; ringrun
    // itself records nothing there.
    ringtorch::Timeline::release_environment_file();
    ::signal(SIGPIPE, SIG_IGN);  // a worker's closed pipe is an error to report, not a reason to die
    ringtorch::LaunchAgent agent(std::move(config));
    return agent.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringrun: %s\n", e.what());
    return 1;
  }
}
