// ddp_bench: what DistributedDataParallel costs and hides. Every rank trains a registry model on
// random 28x28 batches (SGD), alternating rounds of a plain loop (no DDP) and the same loop
// through DistributedDataParallel, and rank 0 prints one JSON line per model:
//   plain_ms / ddp_ms   median step time (forward, backward, step) over the rounds
//   overhead            ddp_ms / plain_ms - 1
//   hidden_fraction     share of the buckets' all-reduce time before backward's last gradient
//                       (mean over the DDP steps; 0 at world size 1, where nothing is sent)
//   ringrun --standalone --nproc_per_node 1 --use_env ddp_bench --model lenet,mlp3
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>

#include <ringtorch/distributed_data_parallel.h>
#include <ringtorch/error.h>
#include <ringtorch/models.h>
#include <ringtorch/process_group.h>
#include <ringtorch/rendezvous.h>

#include "apps/main_guard.h"
#include "base/command_line.h"
#include "base/parse.h"
#include "bench/median.h"
#include "rendezvous/init_method.h"

using ringtorch::median;

namespace {

using Clock = std::chrono::steady_clock;

int run(int argc, char** argv) {
  std::string models = "lenet,mlp3";
  int batch = 64, iters = 30, rounds = 3;
  ringtorch::CommandLine cli("ddp_bench", "usage: ddp_bench [--model a,b] [--batch-size N] [--iters N] [--rounds N]\n");
  cli.option("--model", [&](const std::string& v) { models = v; })
      .option("--batch-size",
              [&](const std::string& v) { batch = ringtorch::parse_int_in_range(v, 1, 1 << 20, "--batch-size"); })
      .option("--iters", [&](const std::string& v) { iters = ringtorch::parse_int_in_range(v, 1, 1 << 20, "--iters"); })
      .option("--rounds", [&](const std::string& v) { rounds = ringtorch::parse_int_in_range(v, 1, 1000, "--rounds"); })
      .ignored("--local_rank");
  if (const int status = cli.parse_main(argc, argv); status >= 0) return status;
  {  // unknown model names fail before the rendezvous
    std::stringstream names(models);
    for (std::string name; std::getline(names, name, ',');) ringtorch::make_model(name);
  }
  auto group = ringtorch::ProcessGroup::create(ringtorch::rendezvous());
  std::stringstream names(models);
  for (std::string name; std::getline(names, name, ',');) {
    torch::manual_seed(0);
    torch::nn::AnyModule plain_model = ringtorch::make_model(name);
    torch::nn::AnyModule ddp_model = ringtorch::make_model(name);
    ringtorch::DistributedDataParallel ddp(ddp_model, group);
    torch::optim::SGD plain_sgd(plain_model.ptr()->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    torch::optim::SGD ddp_sgd(ddp_model.ptr()->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    const at::Tensor x = torch::randn({batch, 1, 28, 28});
    const at::Tensor y = torch::randint(0, 10, {batch}, at::kLong);
    std::vector<double> plain_ms, ddp_ms, hidden;
    auto step = [&](bool distributed) {
      const auto start = Clock::now();
      auto& sgd = distributed ? ddp_sgd : plain_sgd;
      sgd.zero_grad();
      at::Tensor out = distributed ? ddp.forward(x) : plain_model.forward(x);
      torch::cross_entropy_loss(out, y).backward();
      sgd.step();
      return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    };
    for (int w = 0; w < 3; ++w) {
      step(false);
      step(true);
    }
    for (int r = 0; r < rounds; ++r) {
      for (int i = 0; i < iters; ++i) plain_ms.push_back(step(false));
      for (int i = 0; i < iters; ++i) {
        ddp_ms.push_back(step(true));
        if (group->size() > 1) hidden.push_back(ddp.last_iteration_stats().hidden_fraction());
      }
    }
    // The slowest rank's medians.
    at::Tensor t = at::tensor({median(plain_ms), median(ddp_ms)}, at::kDouble);
    group->allreduce(t, ringtorch::ReduceOp::kMax);
    double hidden_mean = 0;
    for (double h : hidden) hidden_mean += h / hidden.size();
    at::Tensor h = at::full({1}, hidden_mean, at::kDouble);
    group->allreduce(h, ringtorch::ReduceOp::kAvg);
    if (group->rank() == 0) {
      const double p = t[0].item<double>(), d = t[1].item<double>();
      std::printf(
          "{\"model\": \"%s\", \"world_size\": %d, \"batch_per_rank\": %d, \"plain_ms\": %.3f, \"ddp_ms\": %.3f, "
          "\"overhead\": %.4f, \"hidden_fraction\": %.3f}\n",
          name.c_str(), group->size(), batch, p, d, d / p - 1, h.item<double>());
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ringtorch::run_reporting_errors("ddp_bench", [&] { return run(argc, argv); });
}
