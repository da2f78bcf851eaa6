// ddp_example: the smallest complete DistributedDataParallel program. Every rank builds the
// same synthetic classification task (784 inputs, 10 classes labelled by a fixed random
// "teacher"), takes its DistributedSampler share, trains the registry's "mlp" under
// DistributedDataParallel, and checkpoints every epoch; a rerun with the same --checkpoint-dir
// resumes after the last finished epoch.
//   ringrun --standalone --nproc_per_node 2 --use_env ddp_example --epochs 3 --checkpoint-dir /tmp/ck
#include <torch/torch.h>

#include <cstdio>
#include <string>

#include <ringtorch/checkpoint.h>
#include <ringtorch/distributed_data_parallel.h>
#include <ringtorch/distributed_sampler.h>
#include <ringtorch/error.h>
#include <ringtorch/models.h>
#include <ringtorch/process_group.h>
#include <ringtorch/rendezvous.h>

#include "apps/main_guard.h"
#include "base/command_line.h"
#include "base/parse.h"
#include "rendezvous/init_method.h"

namespace {

const char kUsage[] =
    "usage: ddp_example [--epochs N] [--batch-size N] [--lr X] [--samples N] [--checkpoint-dir DIR]\n"
    "                   [--init-method URL]\n";

int run(int argc, char** argv) {
  int epochs = 3, batch_size = 64, samples = 4096;
  double lr = 0.1;
  std::string checkpoint_dir;
  ringtorch::RendezvousOptions rdzv_options;
  ringtorch::CommandLine cli("ddp_example", kUsage);
  cli.option("--epochs",
             [&](const std::string& v) { epochs = ringtorch::parse_int_in_range(v, 1, 1 << 20, "--epochs"); })
      .option("--batch-size",
              [&](const std::string& v) { batch_size = ringtorch::parse_int_in_range(v, 1, 1 << 20, "--batch-size"); })
      .option("--samples",
              [&](const std::string& v) { samples = ringtorch::parse_int_in_range(v, 1, 1 << 24, "--samples"); })
      .option("--lr", [&](const std::string& v) { lr = ringtorch::parse_number(v, "--lr"); })
      .option("--checkpoint-dir", [&](const std::string& v) { checkpoint_dir = v; })
      .option("--init-method",
              [&](const std::string& v) {
                ringtorch::parse_init_method(v);
                rdzv_options.init_method = v;
              })
      .ignored("--local_rank");
  if (const int status = cli.parse_main(argc, argv); status >= 0) return status;
  auto rdzv = ringtorch::rendezvous(rdzv_options);
  auto group = ringtorch::ProcessGroup::create(rdzv);
  const int rank = group->rank();

  // The same data on every rank (seeded), labelled by a fixed linear teacher.
  auto generator = at::detail::createCPUGenerator(1234);
  const at::Tensor inputs = at::randn({samples, 784}, generator);
  const at::Tensor labels = inputs.matmul(at::randn({784, 10}, generator)).argmax(1);

  torch::manual_seed(rank);  // different initial weights per rank: DDP broadcasts rank 0's
  torch::nn::AnyModule model = ringtorch::make_model("mlp");
  ringtorch::DistributedDataParallel ddp(model, group);
  torch::optim::SGD sgd(model.ptr()->parameters(), torch::optim::SGDOptions(lr).momentum(0.9));

  ringtorch::TrainingProgress progress;
  std::optional<ringtorch::Checkpointer> checkpoints;
  if (!checkpoint_dir.empty()) {
    checkpoints.emplace(checkpoint_dir);
    if (auto resumed = checkpoints->load_latest(*model.ptr(), &sgd)) {
      progress = *resumed;
      // Epochs count from 0 here (as the seed's loop); --batch-size is per rank, so a new world
      // size changes the global batch, and the learning rate is kept as given.
      const auto was = progress.metadata.find("world_size");
      if (rank == 0)
        std::printf("resumed at epoch %lld step %lld with world size %d (was %s)\n", (long long)progress.epoch,
                    (long long)progress.step, group->size(),
                    was == progress.metadata.end() ? "unknown" : was->second.c_str());
    }
  }
  ringtorch::DistributedSampler sampler(samples, group->size(), rank, {/*shuffle=*/true, /*seed=*/0, false});
  for (int64_t epoch = progress.epoch; epoch < epochs; ++epoch) {
    sampler.set_epoch(epoch);
    // A checkpoint from inside an epoch (another program's) says how much of it was trained.
    sampler.set_start(epoch == progress.epoch ? std::min<int64_t>(progress.samples_in_epoch, samples) : 0);
    const auto mine = sampler.indices();
    at::Tensor loss_sum = at::zeros({1}, at::kDouble);
    int64_t batches = 0;
    for (size_t start = 0; start < mine.size(); start += batch_size) {
      const size_t end = std::min(mine.size(), start + batch_size);
      at::Tensor index = at::tensor(std::vector<int64_t>(mine.begin() + start, mine.begin() + end), at::kLong);
      sgd.zero_grad();
      at::Tensor loss =
          torch::cross_entropy_loss(ddp.forward(inputs.index_select(0, index)), labels.index_select(0, index));
      loss.backward();
      sgd.step();
      loss_sum += loss.item<double>();
      ++batches;
      ++progress.step;
    }
    group->allreduce(loss_sum, ringtorch::ReduceOp::kSum);
    if (rank == 0) {
      std::printf("epoch %lld: mean loss %.4f over %d ranks\n", (long long)epoch,
                  loss_sum.item<double>() / (batches * group->size()), group->size());
      std::fflush(stdout);
    }
    progress.epoch = epoch + 1;  // the next epoch to run
    progress.samples_in_epoch = 0;
    progress.metadata = {{"model", "mlp"}, {"world_size", std::to_string(group->size())}};
    if (checkpoints) checkpoints->save(*model.ptr(), &sgd, progress, group.get());
  }
  double checksum = 0;
  for (const auto& p : model.ptr()->parameters()) checksum += p.sum().item<double>();
  std::printf("rank %d parameter checksum %.9g\n", rank, checksum);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ringtorch::run_reporting_errors("ddp_example", [&] { return run(argc, argv); });
}
