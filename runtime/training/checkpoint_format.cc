#include <ATen/core/Dict.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include <ringtorch/checkpoint_format.h>
#include <ringtorch/error.h>
#include <ringtorch/str_cat.h>

#include "base/log.h"
#include "runtime/training/optimizer_state.h"
#include "runtime/training/pickle_check.h"
#include "runtime/training/pickle_reader.h"

namespace ringtorch {
namespace {

// Format 2 keeps the optimizer's state as plain values ("optimizer_state", optimizer_state.h);
// format 1 kept LibTorch's optimizer archive, a TorchScript module, as bytes ("optimizer").
constexpr char kFormat[] = "ringtorch-checkpoint-2";

}  // namespace

std::vector<char> serialize_checkpoint(const torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                                       const TrainingProgress& progress) {
  c10::impl::GenericDict state(c10::StringType::get(), c10::TensorType::get());
  for (const auto& item : model.named_parameters()) state.insert(item.key(), item.value().detach().cpu());
  for (const auto& item : model.named_buffers()) state.insert(item.key(), item.value().detach().cpu());
  c10::impl::GenericDict metadata(c10::StringType::get(), c10::StringType::get());
  for (const auto& [k, v] : progress.metadata) metadata.insert(k, v);
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("format", std::string(kFormat));
  dict.insert("model", state);
  if (optimizer) dict.insert("optimizer_state", optimizer_state_dict(*optimizer));
  dict.insert("epoch", progress.epoch);
  dict.insert("step", progress.step);
  dict.insert("samples_in_epoch", progress.samples_in_epoch);
  {
    auto generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    dict.insert("rng_state", generator.get_state());
  }
  dict.insert("metadata", metadata);
  if (!progress.extra_state.empty()) {
    c10::impl::GenericDict extra(c10::StringType::get(), c10::TensorType::get());
    for (const auto& [k, v] : progress.extra_state) extra.insert(k, v.detach().cpu());
    dict.insert("extra_state", extra);
  }
  return torch::pickle_save(dict);
}

namespace {

// Checkpoint bytes for LibTorch's zip reader, read only within their bounds. torch::pickle_load's
// own adapter copies whatever range the zip reader asks for, and on a damaged file that range can
// lie past the end of the buffer (tests/fuzz/checkpoint_fuzz found a 7138-byte file read at
// offset 7141, LibTorch 1.13): here such a read comes back short, and the reader fails cleanly.
class BoundedReader : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BoundedReader(const std::vector<char>& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<size_t>(n, bytes_.size() - static_cast<size_t>(pos));
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  const std::vector<char>& bytes_;  // the caller's, alive for the reader's whole life
};

// The "data.pkl" archive read by ringtorch's own pickle reader (pickle_reader.h), each storage
// from its record as a storage of the record's own size: left to itself, LibTorch's unpickler
// gave a storage the size the pickle claims over the record's bytes, whatever their number (a
// fuzzed rng_state read past its record that way).
c10::IValue unpickle(const std::vector<char>& bytes, const std::string& path) {
  check_zip_entry_sizes(bytes.data(), bytes.size(), path);
  caffe2::serialize::PyTorchStreamReader reader(std::make_shared<BoundedReader>(bytes));
  if (!reader.hasRecord("data.pkl")) {
    throw IoError(str_cat("checkpoint ", path, ": the archive has no data.pkl (not written by torch.save)"));
  }
  if (reader.hasRecord("byteorder")) {  // torch 2.x records it; its tensors are in that order
    const auto [order, order_size] = reader.getRecord("byteorder");
    if (std::string(static_cast<const char*>(order.get()), order_size) != "little") {
      throw IoError(str_cat("checkpoint ", path, ": its tensors are stored big-endian"));
    }
  }
  const auto [record, size] = reader.getRecord("data.pkl");
  size_t loaded = 0;  // bytes of every storage read so far
  const StorageLoader load_storage = [&](const std::string& key, at::ScalarType dtype) {
    const std::string name = "data/" + key;
    if (!reader.hasRecord(name)) throw IoError(str_cat("checkpoint ", path, ": no record ", name, " for a tensor"));
    auto [data, data_size] = reader.getRecord(name);
    // Each record within the file (check_zip_entry_sizes) is not enough: many directory entries
    // may name one stretch of it, and every storage is held in memory. So at most twice the
    // file's size is ever read.
    loaded += data_size;
    if (loaded > bytes.size()) {
      throw IoError(str_cat("checkpoint ", path, ": its tensor records add up to more bytes than the file holds (",
                            bytes.size(), ")"));
    }
    const size_t element = c10::elementSize(dtype);
    if (data_size % element != 0) {
      throw IoError(str_cat("checkpoint ", path, ": record ", name, " holds ", data_size, " bytes, not whole ",
                            c10::toString(dtype), " elements"));
    }
    c10::Storage storage(c10::Storage::use_byte_size_t(), data_size, std::move(data), nullptr, false);
    return at::empty({0}, at::TensorOptions().dtype(dtype))
        .set_(storage, 0, {static_cast<int64_t>(data_size / element)}, {1});
  };
  return read_pickle(static_cast<const char*>(record.get()), size, load_storage, path);
}

int64_t int_entry(const c10::impl::GenericDict& dict, const char* key, const std::string& path) {
  if (!dict.contains(key) || !dict.at(key).isInt()) {
    throw InvalidArgumentError(str_cat("checkpoint ", path, ": no integer entry '", key, "'"));
  }
  return dict.at(key).toInt();
}

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

NamedTensors parameters_and_buffers(torch::nn::Module& model) {
  NamedTensors targets;
  for (const auto& item : model.named_parameters()) targets.emplace_back(item.key(), item.value());
  for (const auto& item : model.named_buffers()) targets.emplace_back(item.key(), item.value());
  return targets;
}

// Strict, as load_state_dict(strict=True): same names, same shapes, tensors within their storage.
// Throws InvalidArgumentError naming each difference, `what` saying what the entries are.
void check_fits(const c10::impl::GenericDict& state, const NamedTensors& targets, const std::string& what) {
  for (const auto& entry : state) {
    if (entry.value().isTensor()) check_tensor_within_storage(entry.value().toTensor(), str_cat(what, " entry"));
  }
  std::vector<std::string> problems;
  for (const auto& [name, target] : targets) {
    if (!state.contains(name)) {
      problems.push_back(str_cat("missing '", name, "'"));
    } else if (!state.at(name).isTensor()) {
      problems.push_back(str_cat("'", name, "' is not a tensor"));
    } else if (state.at(name).toTensor().sizes() != target.sizes()) {
      problems.push_back(
          str_cat("'", name, "' has shape ", state.at(name).toTensor().sizes(), ", the model ", target.sizes()));
    }
  }
  if (static_cast<size_t>(state.size()) != targets.size() && problems.empty()) {
    for (const auto& entry : state) {
      const std::string name = entry.key().isString() ? entry.key().toStringRef() : entry.key().tagKind();
      if (std::none_of(targets.begin(), targets.end(), [&](const auto& t) { return t.first == name; })) {
        problems.push_back(str_cat("unexpected '", name, "'"));
      }
    }
  }
  if (!problems.empty()) {
    constexpr size_t kNamed = 6;  // a ResNet's whole list would bury the point
    std::string text;
    for (size_t i = 0; i < std::min(problems.size(), kNamed); ++i) text += "; " + problems[i];
    if (problems.size() > kNamed) text += str_cat("; and ", problems.size() - kNamed, " more");
    throw InvalidArgumentError(str_cat(what, " does not fit the model", text, " (was it saved from another model?)"));
  }
}

TrainingProgress restore(const std::vector<char>& bytes, const std::string& path, torch::nn::Module& model,
                         torch::optim::Optimizer* optimizer) {
  c10::IValue value = unpickle(bytes, path);
  if (!value.isGenericDict()) throw InvalidArgumentError(str_cat("checkpoint ", path, ": not a dict"));
  auto dict = value.toGenericDict();
  if (!dict.contains("model") || !dict.at("model").isGenericDict()) {
    throw InvalidArgumentError(str_cat("checkpoint ", path, ": no 'model' dict"));
  }
  auto state = dict.at("model").toGenericDict();
  NamedTensors targets = parameters_and_buffers(model);
  check_fits(state, targets, str_cat("checkpoint ", path));
  TrainingProgress progress;
  progress.epoch = int_entry(dict, "epoch", path);
  progress.step = int_entry(dict, "step", path);
  progress.samples_in_epoch = dict.contains("samples_in_epoch") ? int_entry(dict, "samples_in_epoch", path) : 0;
  if (dict.contains("metadata") && dict.at("metadata").isGenericDict()) {
    for (const auto& entry : dict.at("metadata").toGenericDict()) {
      if (entry.key().isString() && entry.value().isString())
        progress.metadata[entry.key().toStringRef()] = entry.value().toStringRef();
    }
  }
  if (dict.contains("extra_state")) {
    const c10::IValue& extra = dict.at("extra_state");
    if (!extra.isGenericDict()) throw IoError(str_cat("checkpoint ", path, ": its 'extra_state' is not a dict"));
    for (const auto& entry : extra.toGenericDict()) {
      if (!entry.key().isString() || !entry.value().isTensor()) {
        throw IoError(str_cat("checkpoint ", path, ": its 'extra_state' holds something other than name -> tensor"));
      }
      const std::string& name = entry.key().toStringRef();
      check_tensor_within_storage(entry.value().toTensor(), str_cat("checkpoint ", path, ": extra_state '", name, "'"));
      progress.extra_state[name] = entry.value().toTensor();
    }
  }
  // All or nothing: a checkpoint whose weights are fine but whose optimizer state or RNG state is
  // not must leave the model as it was, or the run that falls back to an older checkpoint (or a
  // fresh start) would begin from this one's weights. The optimizer's new state is built (and
  // checked) before anything changes, and installed last.
  std::optional<OptimizerStateMap> optimizer_state;
  if (optimizer && dict.contains("optimizer_state")) {
    optimizer_state = parse_optimizer_state(*optimizer, dict.at("optimizer_state"), path);
  } else if (optimizer && dict.contains("optimizer")) {
    log_warning(str_cat("checkpoint ", path,
                        " keeps its optimizer state as a TorchScript archive (format 1), which is no longer loaded: "
                        "its weights and position are restored, the optimizer starts fresh"));
  }
  std::vector<at::Tensor> saved_weights;
  saved_weights.reserve(targets.size());
  for (const auto& [name, target] : targets) saved_weights.push_back(target.detach().clone());
  try {
    {
      torch::NoGradGuard no_grad;
      for (auto& [name, target] : targets) target.copy_(state.at(name).toTensor());
    }
    if (dict.contains("rng_state")) {
      // set_state reads the tensor as the generator's own bytes: exactly that many, in place.
      auto generator = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(generator.mutex());
      const at::Tensor current = generator.get_state();
      const c10::IValue& saved = dict.at("rng_state");
      if (!saved.isTensor() || saved.toTensor().scalar_type() != at::kByte || !saved.toTensor().is_cpu() ||
          !saved.toTensor().is_contiguous() || saved.toTensor().numel() != current.numel()) {
        throw IoError(str_cat("checkpoint ", path, ": its 'rng_state' is not the CPU generator's state (",
                              current.numel(), " bytes)"));
      }
      check_tensor_within_storage(saved.toTensor(), str_cat("checkpoint ", path, ": its 'rng_state'"));
      generator.set_state(saved.toTensor());
    }
  } catch (...) {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < targets.size(); ++i) targets[i].second.copy_(saved_weights[i]);
    throw;
  }
  if (optimizer_state) optimizer->state() = std::move(*optimizer_state);
  return progress;
}

// The state_dict in `value`: the dict itself, or its "model", "state_dict" or "model_state_dict"
// entry (a ringtorch checkpoint; the usual names of Python training scripts' checkpoints).
c10::impl::GenericDict find_state_dict(const c10::IValue& value, const std::string& path, std::string* source) {
  if (!value.isGenericDict()) {
    throw InvalidArgumentError(str_cat(path, " holds a ", value.tagKind(), ", not a state_dict (a dict of tensors)"));
  }
  auto dict = value.toGenericDict();
  for (const char* key : {"model", "state_dict", "model_state_dict"}) {
    if (dict.contains(key) && dict.at(key).isGenericDict()) {
      *source = str_cat("its '", key, "' entry");
      return dict.at(key).toGenericDict();
    }
  }
  *source = "the state_dict";
  return dict;
}

// A state_dict saved from a model wrapped in DistributedDataParallel or DataParallel names every
// entry "module.<name>": the names without it, when every entry has it.
c10::impl::GenericDict without_module_prefix(const c10::impl::GenericDict& state, std::string* source) {
  static const std::string kPrefix = "module.";
  if (state.empty()) return state;
  for (const auto& entry : state) {
    if (!entry.key().isString() || entry.key().toStringRef().rfind(kPrefix, 0) != 0) return state;
  }
  c10::impl::GenericDict renamed(c10::StringType::get(), c10::AnyType::get());
  for (const auto& entry : state) renamed.insert(entry.key().toStringRef().substr(kPrefix.size()), entry.value());
  *source += ", without the 'module.' of a wrapped model's names";
  return renamed;
}

std::string restore_weights(const std::vector<char>& bytes, const std::string& path, torch::nn::Module& model) {
  std::string source;
  const c10::impl::GenericDict state =
      without_module_prefix(find_state_dict(unpickle(bytes, path), path, &source), &source);
  NamedTensors targets = parameters_and_buffers(model);
  check_fits(state, targets, str_cat(path, " (", source, ")"));
  torch::NoGradGuard no_grad;
  for (auto& [name, target] : targets) target.copy_(state.at(name).toTensor());
  return source;
}

// LibTorch reports damaged bytes with c10::Error and with exceptions of its own (the zip reader's):
// every one becomes an IoError naming the file.
template <typename Function>
auto naming_the_file(const std::string& path, Function&& function) -> decltype(function()) {
  try {
    return function();
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw IoError(str_cat("checkpoint ", path, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    throw IoError(str_cat("checkpoint ", path, ": ", e.what()));
  }
}

}  // namespace

c10::IValue read_torch_save(const std::vector<char>& bytes, const std::string& path) {
  return naming_the_file(path, [&] { return unpickle(bytes, path); });
}

std::string restore_state_dict(const std::vector<char>& bytes, const std::string& path, torch::nn::Module& model) {
  return naming_the_file(path, [&] { return restore_weights(bytes, path, model); });
}

TrainingProgress restore_checkpoint(const std::vector<char>& bytes, const std::string& path, torch::nn::Module& model,
                                    torch::optim::Optimizer* optimizer) {
  return naming_the_file(path, [&] { return restore(bytes, path, model, optimizer); });
}

}  // namespace ringtorch
