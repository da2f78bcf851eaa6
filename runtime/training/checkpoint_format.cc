#include <ATen/core/Dict.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/storage_context.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <algorithm>
#include <cctype>
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

// A pickle names the types of typed containers in text ("Dict[str, Tensor]"), which LibTorch parses
// with TorchScript's type parser; on some damaged text that parser dereferences a wild pointer
// (tests/fuzz/checkpoint_fuzz, LibTorch 1.13). Only the plain types a checkpoint can hold reach it:
//   type := name | name "[" type ("," type)* "]"
bool is_plain_type(const std::string& text, size_t& at, int depth) {
  static const char* const kNames[] = {"str", "int",  "float", "bool",  "complex",  "Tensor",
                                       "Any", "Dict", "List",  "Tuple", "Optional", "NoneType"};
  while (at < text.size() && text[at] == ' ') ++at;
  const size_t start = at;
  while (at < text.size() && std::isalpha(static_cast<unsigned char>(text[at]))) ++at;
  const std::string name = text.substr(start, at - start);
  if (std::none_of(std::begin(kNames), std::end(kNames), [&](const char* known) { return name == known; })) {
    return false;
  }
  if (at < text.size() && text[at] == '[') {
    if (depth >= 8) return false;
    do {
      ++at;
      if (!is_plain_type(text, at, depth + 1)) return false;
      while (at < text.size() && text[at] == ' ') ++at;
    } while (at < text.size() && text[at] == ',');
    if (at >= text.size() || text[at] != ']') return false;
    ++at;
  }
  return true;
}

c10::TypePtr parse_plain_type(const std::string& text) {
  size_t at = 0;
  if (!is_plain_type(text, at, 0) || at != text.size()) {
    throw IoError(str_cat("its pickle names the type '", text.substr(0, 80), "', which no checkpoint holds"));
  }
  return torch::jit::Unpickler::defaultTypeParser(text);
}

// What torch::pickle_load does, through BoundedReader and parse_plain_type, after
// check_pickle_structure: the "data.pkl" archive and its tensors.
c10::IValue unpickle(const std::vector<char>& bytes, const std::string& path) {
  check_zip_entry_sizes(bytes.data(), bytes.size(), path);
  caffe2::serialize::PyTorchStreamReader reader(std::make_shared<BoundedReader>(bytes));
  if (reader.hasRecord("data.pkl")) {  // else LibTorch's own error says the record is missing
    const auto [record, size] = reader.getRecord("data.pkl");
    check_pickle_structure(static_cast<const char*>(record.get()), size, path);
  }
  // Every tensor record as a storage of the record's own size: left to itself, the unpickler
  // gives a storage the size the pickle claims over the record's bytes, whatever their number (a
  // fuzzed rng_state read past its record that way).
  auto storages = std::make_shared<torch::jit::DeserializationStorageContext>();
  for (const std::string& name : reader.getAllRecords()) {
    if (name.rfind("data/", 0) != 0) continue;
    auto [bytes_of_record, size] = reader.getRecord(name);
    storages->addStorage(name.substr(5), c10::Storage(c10::Storage::use_byte_size_t(), size, std::move(bytes_of_record),
                                                      nullptr, false));
  }
  return torch::jit::readArchiveAndTensors("data", /*pickle_prefix=*/"", /*tensor_prefix=*/"",
                                           /*type_resolver=*/{}, /*obj_loader=*/{}, /*device=*/{}, reader,
                                           parse_plain_type, storages);
}

int64_t int_entry(const c10::impl::GenericDict& dict, const char* key, const std::string& path) {
  if (!dict.contains(key) || !dict.at(key).isInt()) {
    throw InvalidArgumentError(str_cat("checkpoint ", path, ": no integer entry '", key, "'"));
  }
  return dict.at(key).toInt();
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
  for (const auto& entry : state) {
    if (entry.value().isTensor()) {
      check_tensor_within_storage(entry.value().toTensor(), str_cat("checkpoint ", path, ": its model entry"));
    }
  }
  // Strict, as load_state_dict(strict=True): same names, same shapes.
  std::vector<std::pair<std::string, at::Tensor>> targets;
  for (const auto& item : model.named_parameters()) targets.emplace_back(item.key(), item.value());
  for (const auto& item : model.named_buffers()) targets.emplace_back(item.key(), item.value());
  std::string problems;
  for (const auto& [name, target] : targets) {
    if (!state.contains(name)) {
      problems += str_cat("; missing '", name, "'");
    } else if (!state.at(name).isTensor()) {
      problems += str_cat("; '", name, "' is not a tensor");
    } else if (state.at(name).toTensor().sizes() != target.sizes()) {
      problems +=
          str_cat("; '", name, "' has shape ", state.at(name).toTensor().sizes(), ", the model ", target.sizes());
    }
  }
  if (static_cast<size_t>(state.size()) != targets.size() && problems.empty()) {
    for (const auto& entry : state) {
      const std::string name = entry.key().isString() ? entry.key().toStringRef() : entry.key().tagKind();
      if (std::none_of(targets.begin(), targets.end(), [&](const auto& t) { return t.first == name; })) {
        problems += str_cat("; unexpected '", name, "'");
      }
    }
  }
  if (!problems.empty()) {
    throw InvalidArgumentError(
        str_cat("checkpoint ", path, " does not fit the model", problems, " (was it saved from another model?)"));
  }
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

}  // namespace

TrainingProgress restore_checkpoint(const std::vector<char>& bytes, const std::string& path, torch::nn::Module& model,
                                    torch::optim::Optimizer* optimizer) {
  // LibTorch reports damaged bytes with c10::Error and with exceptions of its own (the unpickler's
  // torch::jit::ErrorReport): every one becomes an IoError naming the file.
  try {
    return restore(bytes, path, model, optimizer);
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw IoError(str_cat("checkpoint ", path, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    throw IoError(str_cat("checkpoint ", path, ": ", e.what()));
  }
}

}  // namespace ringtorch
