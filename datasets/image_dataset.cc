#include <ATen/ATen.h>

#include <filesystem>

#include <ringtorch/error.h>
#include <ringtorch/image_dataset.h>

#include "datasets/cifar_file.h"
#include "datasets/idx_file.h"

namespace ringtorch {

const char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

namespace {

// "train-images-idx3-ubyte.gz" or the same without .gz, whichever exists.
std::string idx_path(const std::string& dir, const std::string& stem) {
  const std::string plain = dir + "/" + stem;
  if (std::filesystem::exists(plain + ".gz")) return plain + ".gz";
  if (std::filesystem::exists(plain)) return plain;
  throw IoError(str_cat("missing dataset file ", plain, "(.gz) (Fashion-MNIST: apt-get install dataset-fashion-mnist; ",
                        "MNIST: put the four IDX files in --data-dir)"));
}

ImageDataset load_idx(const std::string& name, const std::string& dir, bool train) {
  const std::string prefix = train ? "train" : "t10k";
  const std::string images_path = idx_path(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = idx_path(dir, prefix + "-labels-idx1-ubyte");
  at::Tensor images = read_idx_images(images_path);
  at::Tensor labels = read_idx_labels(labels_path);
  if (images.size(0) != labels.size(0)) {
    throw InvalidArgumentError(str_cat(labels_path, " has ", labels.size(0), " labels but ", images_path, " has ",
                                       images.size(0), " images: the files do not belong together"));
  }
  ImageDataset set;
  // ToTensor() then Normalize((0.5,), (0.5,)): (x / 255 - 0.5) / 0.5.
  set.images = images.to(at::kFloat).div_(255).sub_(0.5).div_(0.5).unsqueeze(1).contiguous();
  set.labels = labels;
  set.description = str_cat(name, train ? " train" : " test", " (", set.size(), " images from ", dir, ")");
  return set;
}

// CIFAR-10's per-channel mean and standard deviation over its 50000 training images (of
// x / 255), the values PyTorch's CIFAR examples pass to Normalize; the test split uses them too.
constexpr float kCifarMean[3] = {0.4914f, 0.4822f, 0.4465f};
constexpr float kCifarStd[3] = {0.2470f, 0.2435f, 0.2616f};

// The batch files in `dir`, or in dir/cifar-10-batches-bin where the tarball unpacks them.
std::string cifar_dir(const std::string& dir) {
  const std::string first = cifar10_batch_names(true)[0];
  if (!std::filesystem::exists(dir + "/" + first) && std::filesystem::exists(dir + "/cifar-10-batches-bin/" + first)) {
    return dir + "/cifar-10-batches-bin";
  }
  return dir;
}

ImageDataset load_cifar10(const std::string& data_dir, bool train) {
  const std::string dir = cifar_dir(data_dir);
  std::vector<at::Tensor> images, labels;
  for (const auto& name : cifar10_batch_names(train)) {
    const std::string path = dir + "/" + name;
    if (!std::filesystem::exists(path)) {
      throw IoError(str_cat("missing dataset file ", path,
                            " (cifar10: --data-dir holds the binary version's data_batch_1..5.bin and test_batch.bin, "
                            "or the cifar-10-batches-bin folder)"));
    }
    auto [x, y] = read_cifar10_batch(path);
    images.push_back(x);
    labels.push_back(y);
  }
  ImageDataset set;
  // ToTensor() then Normalize(mean, std) per channel.
  const at::Tensor mean = at::tensor(at::ArrayRef<float>(kCifarMean, 3)).view({1, 3, 1, 1});
  const at::Tensor std = at::tensor(at::ArrayRef<float>(kCifarStd, 3)).view({1, 3, 1, 1});
  set.images = at::cat(images).to(at::kFloat).div_(255).sub_(mean).div_(std).contiguous();
  set.labels = at::cat(labels);
  set.description = str_cat("cifar10", train ? " train" : " test", " (", set.size(), " images from ", dir, ")");
  return set;
}

// Deterministic images whose class is written into them (a bright 4x4 patch at a
// class-dependent place over noise), so that models can learn it.
ImageDataset synthetic(bool train) {
  const int64_t n = train ? 60000 : 10000;
  auto generator = at::detail::createCPUGenerator(train ? 1 : 2);
  ImageDataset set;
  set.labels = at::randint(0, 10, {n}, generator, at::kLong);
  set.images = at::randn({n, 1, 28, 28}, generator).mul_(0.3);
  auto labels = set.labels.accessor<int64_t, 1>();
  auto images = set.images.accessor<float, 4>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = 2 + (labels[i] / 5) * 12, col = 2 + (labels[i] % 5) * 5;
    for (int64_t r = 0; r < 4; ++r) {
      for (int64_t c = 0; c < 4; ++c) images[i][0][row + r][col + c] += 1.0f;
    }
  }
  set.description = str_cat("synthetic", train ? " train" : " test", " (", n, " generated images)");
  return set;
}

}  // namespace

std::pair<at::Tensor, at::Tensor> ImageDataset::batch(const std::vector<int64_t>& indices) const {
  at::Tensor index =
      at::from_blob(const_cast<int64_t*>(indices.data()), {static_cast<int64_t>(indices.size())}, at::kLong);
  return {images.index_select(0, index), labels.index_select(0, index)};
}

std::vector<std::string> dataset_names() { return {"cifar10", "fashion-mnist", "mnist", "synthetic"}; }

namespace {

ImageDataset load_any(const std::string& name, const std::string& data_dir, bool train) {
  if (name == "fashion-mnist") return load_idx(name, data_dir.empty() ? kFashionMnistDir : data_dir, train);
  if (name == "mnist") {
    if (data_dir.empty()) throw InvalidArgumentError("dataset mnist needs --data-dir (the four IDX files)");
    return load_idx(name, data_dir, train);
  }
  if (name == "cifar10") {
    if (data_dir.empty()) throw InvalidArgumentError("dataset cifar10 needs --data-dir (the binary version's batches)");
    return load_cifar10(data_dir, train);
  }
  if (name == "synthetic") return synthetic(train);
  throw InvalidArgumentError(
      str_cat("unknown dataset '", name, "'; known datasets: cifar10, fashion-mnist, mnist, synthetic"));
}

}  // namespace

ImageDataset load_dataset(const std::string& name, const std::string& data_dir, bool train) {
  ImageDataset set = load_any(name, data_dir, train);
  // Well-formed files with no records would train on nothing and report a loss of 0 (or an
  // accuracy of 0/0) as a success.
  if (set.size() == 0) {
    throw InvalidArgumentError(
        str_cat(set.description, ": no records; ", train ? "training" : "testing", " needs at least one"));
  }
  return set;
}

}  // namespace ringtorch
