// Rendezvous of one rank through a file store, using only the installed headers and libraries.
#include <cstdio>

#include "rendezvous/rendezvous.h"
#include "runtime/launch/launch_config.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  ringtorch::RendezvousOptions options;
  options.init_method = std::string("file://") + argv[1] + "?rank=0&world_size=1";
  auto rdzv = ringtorch::rendezvous(options);
  rdzv.store->set("consumer", {'o', 'k'});
  auto v = rdzv.store->get("consumer");
  std::printf("consumer: rank %d/%d, store says %s\n", rdzv.rank, rdzv.world_size,
              std::string(v.begin(), v.end()).c_str());
  return 0;
}
