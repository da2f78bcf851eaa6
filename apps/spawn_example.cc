// spawn_example: the second seed's program in C++. main() counts the CUDA devices (or takes
// --nprocs; one process on the CPU when there is no GPU) and spawns that many ranks with
// ringtorch::spawn, as the seed's mp.spawn(train, args=(world_size,), nprocs=world_size); each
// rank joins the group, wraps the seed's SimpleModel (Linear 784 -> 10) in
// DistributedDataParallel, takes its DistributedSampler share of Fashion-MNIST, trains with SGD
// and prints "Rank R, Epoch [e/E], Loss: x" (the last batch's loss) after each epoch.
//   spawn_example --nprocs 2 --epochs 3
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstdio>
#include <string>

#include <ringtorch/distributed_data_parallel.h>
#include <ringtorch/distributed_sampler.h>
#include <ringtorch/error.h>
#include <ringtorch/image_dataset.h>
#include <ringtorch/models.h>
#include <ringtorch/process_group.h>
#include <ringtorch/rendezvous.h>
#include <ringtorch/spawn.h>

#include "apps/main_guard.h"
#include "base/command_line.h"
#include "base/parse.h"

namespace {

const char kUsage[] =
    "usage: spawn_example [--nprocs N] [--epochs N] [--batch-size N] [--lr X] [--dataset NAME]\n"
    "                     [--data-dir DIR]\n"
    "  --nprocs N      ranks to spawn (default: the number of CUDA devices, else 1 on the CPU)\n"
    "  --epochs N      default 10, as the seed;  --batch-size N  default 64;  --lr X  default 0.01\n"
    "  --dataset NAME  fashion-mnist (default), mnist, synthetic, cifar10 (see ringtrain --help)\n";

struct Flags {
  int nprocs = 0;  // 0: count the devices
  int epochs = 10;
  int batch_size = 64;
  double lr = 0.01;
  std::string dataset = "fashion-mnist";
  std::string data_dir;
};

// Runs again in every spawned rank (spawn() re-executes the program): keep it pure. -1: go on;
// else the exit status (help: 0, bad flags: 2).
int parse_flags(int argc, char** argv, Flags& f) {
  ringtorch::CommandLine cli("spawn_example", kUsage);
  cli.option("--nprocs",
             [&](const std::string& v) { f.nprocs = ringtorch::parse_int_in_range(v, 1, 1024, "--nprocs"); })
      .option("--epochs",
              [&](const std::string& v) { f.epochs = ringtorch::parse_int_in_range(v, 1, 1 << 20, "--epochs"); })
      .option(
          "--batch-size",
          [&](const std::string& v) { f.batch_size = ringtorch::parse_int_in_range(v, 1, 1 << 20, "--batch-size"); })
      .option("--lr", [&](const std::string& v) { f.lr = ringtorch::parse_number(v, "--lr"); })
      .option("--dataset", [&](const std::string& v) { f.dataset = v; })
      .option("--data-dir", [&](const std::string& v) { f.data_dir = v; });
  return cli.parse_main(argc, argv);
}

// The seed's train(rank, world_size), run in each spawned process.
void train(int rank, int world_size, const Flags& flags) {
  ringtorch::RendezvousOptions rdzv;  // env://, which spawn() pointed at its own store
  rdzv.rank = rank;
  rdzv.world_size = world_size;
  auto group = ringtorch::ProcessGroup::create(ringtorch::rendezvous(rdzv));

  const bool cuda = torch::cuda::device_count() > 0;
  const torch::Device device = cuda ? torch::Device(torch::kCUDA, rank % torch::cuda::device_count()) : torch::kCPU;
  torch::nn::AnyModule model = ringtorch::make_model("mlp");  // the seed's SimpleModel
  model.ptr()->to(device);
  ringtorch::DistributedDataParallel ddp(model, group);
  torch::optim::SGD optimizer(model.ptr()->parameters(), torch::optim::SGDOptions(flags.lr));

  const ringtorch::ImageDataset train_set = ringtorch::load_dataset(flags.dataset, flags.data_dir, /*train=*/true);
  ringtorch::DistributedSampler sampler(train_set.size(), world_size, rank);
  for (int epoch = 0; epoch < flags.epochs; ++epoch) {
    sampler.set_epoch(epoch);
    const std::vector<int64_t> mine = sampler.indices();
    at::Tensor loss;
    for (size_t start = 0; start < mine.size(); start += static_cast<size_t>(flags.batch_size)) {
      const size_t end = std::min(mine.size(), start + static_cast<size_t>(flags.batch_size));
      auto [data, target] = train_set.batch(std::vector<int64_t>(mine.begin() + start, mine.begin() + end));
      data = data.to(device);
      target = target.to(device);
      optimizer.zero_grad();
      loss = torch::cross_entropy_loss(ddp.forward(data), target);
      loss.backward();
      optimizer.step();
    }
    std::printf("Rank %d, Epoch [%d/%d], Loss: %.4f\n", rank, epoch + 1, flags.epochs, loss.item<double>());
    std::fflush(stdout);
  }
  group->shutdown();
}

int run(const Flags& flags) {
  const int devices = static_cast<int>(torch::cuda::device_count());
  const int world_size = flags.nprocs > 0 ? flags.nprocs : std::max(devices, 1);
  if (!ringtorch::in_spawned_child()) {
    std::printf("Spawning %d rank%s (%d CUDA device%s visible)\n", world_size, world_size > 1 ? "s" : "", devices,
                devices == 1 ? "" : "s");
    std::fflush(stdout);
  }
  ringtorch::SpawnOptions options;
  options.nprocs = world_size;
  ringtorch::spawn([&](int rank) { train(rank, world_size, flags); }, options);
  std::printf("All %d ranks finished\n", world_size);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (const int status = parse_flags(argc, argv, flags); status >= 0) return status;
  return ringtorch::run_reporting_errors("spawn_example", [&] { return run(flags); });
}
