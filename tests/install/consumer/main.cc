// A program outside ringtorch, built with only the installed public headers and libraries: one
// rank rendezvouses through a file store, makes a process group and all-reduces a tensor.
#include <cstdio>

#include <ringtorch/ringtorch.h>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  ringtorch::RendezvousOptions options;
  options.init_method = std::string("file://") + argv[1] + "?rank=0&world_size=1";
  auto rdzv = ringtorch::rendezvous(options);
  rdzv.store->set("consumer", {'o', 'k'});
  auto v = rdzv.store->get("consumer");
  auto group = ringtorch::ProcessGroup::create(rdzv);
  at::Tensor t = at::ones({4});
  group->allreduce(t);
  std::printf("consumer: rank %d/%d, store says %s, all-reduce %.0f over route %s\n", rdzv.rank, rdzv.world_size,
              std::string(v.begin(), v.end()).c_str(), t[0].item<float>(),
              ringtorch::route_name(group->description().route("allreduce")));
  return 0;
}
