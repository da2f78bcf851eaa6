// Image classification datasets held in memory as tensors, as the seeds' torchvision datasets:
// (Fashion-)MNIST with ToTensor() + Normalize((0.5,), (0.5,)) -> float32 [N, 1, 28, 28] in
// [-1, 1]; CIFAR-10 with ToTensor() + per-channel Normalize(mean, std) -> float32
// [N, 3, 32, 32]; labels int64 [N]. The whole set is read once; batches are gathered by index
// (the sampler's).
//
// Example (given: const std::vector<int64_t>& indices):
//   auto train = ringtorch::load_dataset("fashion-mnist", "", /*train=*/true);
//   auto [x, y] = train.batch(indices);
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace ringtorch {

struct ImageDataset {
  at::Tensor images;        // float32 [N, C, H, W], normalised
  at::Tensor labels;        // int64 [N]
  std::string description;  // "fashion-mnist train (60000 images from /usr/share/...)"

  int64_t size() const { return labels.size(0); }
  int64_t channels() const { return images.size(1); }
  int64_t height() const { return images.size(2); }
  int64_t width() const { return images.size(3); }
  static constexpr int64_t kClasses = 10;  // every dataset here has ten classes
  // The images and labels at `indices` (copies, contiguous).
  std::pair<at::Tensor, at::Tensor> batch(const std::vector<int64_t>& indices) const;
};

// Debian's dataset-fashion-mnist installs here.
extern const char kFashionMnistDir[];

// `name`: "fashion-mnist" (data_dir default kFashionMnistDir), "mnist" (data_dir required:
// the four IDX files, plain or .gz), "synthetic" (deterministic: 60000/10000 images whose
// label is recoverable, for tests and benchmarks without files), "cifar10" (data_dir required:
// data_batch_1..5.bin and test_batch.bin, directly or in cifar-10-batches-bin/).
// Throws InvalidArgumentError naming the known datasets for another name; IoError /
// InvalidArgumentError for bad files.
ImageDataset load_dataset(const std::string& name, const std::string& data_dir, bool train);

std::vector<std::string> dataset_names();

}  // namespace ringtorch
