// Set-up: the first phase of train() (training_run.h).
#include "apps/trainer/training_run.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include <ringtorch/error.h>
#include <ringtorch/image_dataset.h>
#include <ringtorch/models.h>
#include <ringtorch/timeline.h>

#include "apps/trainer/cpu_throttle.h"
#include "apps/trainer/grad_compression.h"
#include "apps/trainer/local_steps.h"
#include "base/log.h"
#include "base/openblas.h"
#include "base/parse.h"

namespace ringtorch {
namespace {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainerOptions& o, torch::nn::Module& model) {
  if (o.optimizer == "adam") {
    return std::make_unique<torch::optim::Adam>(model.parameters(),
                                                torch::optim::AdamOptions(o.lr).weight_decay(o.weight_decay));
  }
  return std::make_unique<torch::optim::SGD>(
      model.parameters(), torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
}

// LOCAL_RANK as ringrun and torchrun set it; 0 when run by hand.
int local_rank() {
  const char* text = std::getenv("LOCAL_RANK");
  return text && *text ? parse_int_in_range(text, 0, 1 << 20, "LOCAL_RANK") : 0;
}

PlacedModel place_model(const TrainerOptions& o, const ImageShape& shape, const std::vector<c10::Device>& devices) {
  // Modules draw their initial weights from LibTorch's default generator, one per process, and
  // train() may run on several threads of one process (the tests' thread ranks): seeding and the
  // draws after it hold this lock, so that each rank's model starts from o.seed whatever the
  // others draw meanwhile.
  static std::mutex default_generator;
  std::lock_guard<std::mutex> lock(default_generator);
  PlacedModel placed;
  torch::manual_seed(o.seed);
  if (devices.size() == 1) {
    placed.single = make_model(o.model, shape);
    placed.single.ptr()->to(devices[0]);
  } else {
    // Every replica starts from the same seed; DataParallel copies the primary's weights anyway.
    placed.replicas = std::make_unique<DataParallel>(
        [&] {
          torch::manual_seed(o.seed);
          return make_model(o.model, shape);
        },
        devices);
  }
  return placed;
}

// LibTorch makes its default CPU generator on first use, under a guard inside its own
// uninstrumented code. Thread ranks (the tests) that first used it on two threads at once, one
// drawing a synthetic dataset (whose own generator's draw takes the default as a fallback) and
// one seeding its model, were reported by TSan as a race on the generator. Asked for first here,
// through a function-local static whose guard TSan sees, every later use is ordered after its
// creation.
void create_default_generator_once() {
  static const at::Generator generator = at::detail::getDefaultCPUGenerator();
  (void)generator;
}

// A process started without a launcher that sets OPENBLAS_CORETYPE may run OpenBLAS's oldest
// kernels on a CPU its OpenBLAS does not know (base/openblas.h): said once per process.
void warn_of_slow_blas_kernels_once() {
  static const bool warned = [] {
    const std::string advice = openblas_kernels_advice();
    if (!advice.empty()) log_warning(advice);
    return true;
  }();
  (void)warned;
}

// Every rank reads the whole set once; batches are gathered by the sampler's indices.
void load_datasets(const TrainerOptions& o, int rank, ElasticHooks::Datasets& data) {
  if (data.train) return;
  data.train = load_dataset(o.dataset, o.data_dir, /*train=*/true);
  data.test = load_dataset(o.dataset, o.data_dir, /*train=*/false);
  if (rank == 0) std::printf("%s; %s\n", data.train->description.c_str(), data.test->description.c_str());
}

}  // namespace

TrainingRun set_up_run(const TrainerOptions& o, ProcessGroup& group, ElasticHooks::Datasets* datasets) {
  create_default_generator_once();
  if (o.threads > 0) {
    torch::set_num_threads(o.threads);
    set_blas_threads(o.threads);  // OpenBLAS keeps its own pool (base/openblas.h)
  }
  TrainingRun run{o, group};
  run.rank = group.rank();
  run.world = group.size();
  if (!datasets) {  // else the caller keeps the images across runs (in-process recovery)
    run.own_datasets = std::make_shared<ElasticHooks::Datasets>();
    datasets = run.own_datasets.get();
  }
  ElasticHooks::Datasets& data = *datasets;
  load_datasets(o, run.rank, data);
  run.train_set = &*data.train;
  run.test_set = &*data.test;
  run.train_size =
      o.max_train_samples > 0 ? std::min<int64_t>(o.max_train_samples, run.train_set->size()) : run.train_set->size();
  if (!o.devices.empty()) {
    run.devices.devices = o.devices;
  } else {
    run.devices = select_devices(o.device, o.gpus, local_rank(), static_cast<int>(torch::cuda::device_count()));
  }
  if (!run.devices.note.empty() && run.rank == 0) std::printf("%s\n", run.devices.note.c_str());
  run.device = run.devices.devices[0];
  if (run.device.is_cpu()) warn_of_slow_blas_kernels_once();
  const ImageDataset& images = *run.train_set;
  const ImageShape shape{images.channels(), images.height(), images.width(), ImageDataset::kClasses};
  run.model = place_model(o, shape, run.devices.devices);
  run.ddp_options.comm_hook =
      make_comm_hook(parse_grad_compression(o.grad_compression), o.powersgd_start_step, &run.powersgd);
  run.ddp_options.uneven_inputs = o.balance != "equal";  // Note [Uneven inputs]: the weighted average
  // With uneven batches the balancer reads each step's compute time; time a CPU quota held this
  // process still inside a wait counts as compute (cpu_throttle.h).
  if (run.ddp_options.uneven_inputs && CpuThrottleClock::process().available()) {
    run.ddp_options.stall_clock = [] { return CpuThrottleClock::process().throttled(); };
  }
  run.train_in(std::shared_ptr<ProcessGroup>(&group, [](ProcessGroup*) {}));
  run.optimizer = make_optimizer(o, run.model.module());
  return run;
}

void TrainingRun::train_in(const std::shared_ptr<ProcessGroup>& training_group) {
  ddp.reset();                    // the old one's hooks stay registered, but inert
  if (options.local_steps > 0) {  // no gradient all-reduce: every rank trains its replica (local_steps.h)
    if (local_sgd) {
      local_sgd->set_group(training_group);
    } else {
      local_sgd = std::make_unique<LocalSgd>(model.module(), training_group, local_sgd_options(options));
    }
    return;
  }
  if (!training_group->is_member()) return;
  ddp = model.replicas ? std::make_unique<DistributedDataParallel>(*model.replicas, training_group, ddp_options)
                       : std::make_unique<DistributedDataParallel>(model.single, training_group, ddp_options);
}

// Note [Resuming inside an epoch]
// A checkpoint taken inside an epoch records how many samples of the epoch's order (the seeded
// shuffle every rank computes, epoch_order()) the job trained: with DistributedSampler's
// strided split and equal batches, after k steps of batch b on W ranks these are exactly the
// first k x b x W of the order; with --balance, the first k x global batch. A restarted job,
// with any world size, deals out the rest of the order, so no sample of the interrupted epoch
// is trained twice or skipped; only the padding that evens out the ranks (at most W - 1
// samples, or the last step's, as DistributedSampler always pads) repeats some. The steps after
// the newest checkpoint and before the failure are lost and trained again.
TrainingProgress TrainingRun::position_in_epoch(int64_t epoch, int64_t samples_done) const {
  TrainingProgress inside = progress;
  inside.epoch = epoch;
  inside.samples_in_epoch = std::min(samples_done, train_size);
  inside.metadata = checkpoint_metadata();
  return inside;
}

std::map<std::string, std::string> TrainingRun::checkpoint_metadata() const {
  return {{"model", options.model}, {"dataset", options.dataset}, {"world_size", std::to_string(world)}};
}

}  // namespace ringtorch
