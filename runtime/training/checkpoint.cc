#include <fcntl.h>
#include <torch/torch.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <ringtorch/checkpoint.h>
#include <ringtorch/error.h>

#include "base/atomic_file.h"
#include "base/log.h"

namespace ringtorch {
namespace fs = std::filesystem;
namespace {

constexpr char kPrefix[] = "checkpoint-";
constexpr char kSuffix[] = ".pt";
constexpr char kSidecar[] = ".crc32";

std::string file_name(int64_t step) {
  char name[64];
  std::snprintf(name, sizeof(name), "%s%010lld%s", kPrefix, static_cast<long long>(step), kSuffix);
  return name;
}

uint32_t crc_of(const std::vector<char>& bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  size_t done = 0;
  while (done < bytes.size()) {  // crc32 takes a uInt length
    const size_t n = std::min<size_t>(bytes.size() - done, 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + done), static_cast<uInt>(n));
    done += n;
  }
  return static_cast<uint32_t>(crc);
}

// The whole file (a checkpoint's size is its model's: no bound but the file's own size). Only a
// regular file: a FIFO or a device named by mistake would block or never end.
std::vector<char> read_file(const std::string& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec) throw IoError(str_cat("checkpoint: cannot read ", path, ": ", ec.message()));
  if (!fs::is_regular_file(status)) throw IoError(str_cat("checkpoint: ", path, " is not a regular file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(str_cat("checkpoint: cannot read ", path));
  std::vector<char> bytes(std::istreambuf_iterator<char>(in), {});
  if (in.bad()) throw IoError(str_cat("checkpoint: reading ", path, " failed"));
  return bytes;
}

// Why `path` cannot be trusted, or "" when its sidecar matches. Called when the sidecar exists.
std::string verify(const std::string& path, const std::vector<char>& bytes) {
  std::ifstream sidecar(path + kSidecar);
  if (!sidecar) return "its checksum file " + path + kSidecar + " cannot be opened";
  std::string crc_hex, rest;
  size_t size = 0;
  const bool parsed = static_cast<bool>(sidecar >> crc_hex >> size) && !(sidecar >> rest) && !crc_hex.empty() &&
                      crc_hex.size() <= 8 && crc_hex.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!parsed) {
    return str_cat("its checksum file ", path, kSidecar, " cannot be read (it should hold \"<crc32 hex> <bytes>\")");
  }
  if (size != bytes.size()) return str_cat("it has ", bytes.size(), " bytes, its checksum file says ", size);
  std::ostringstream actual;
  actual << std::hex << crc_of(bytes);
  if (actual.str() != crc_hex) return str_cat("crc32 ", actual.str(), " does not match the recorded ", crc_hex);
  return "";
}

// Every checkpoint-<step>.pt in `directory`, with or without its sidecar, oldest first (the
// steps are zero-padded: name order is step order).
std::vector<std::string> checkpoint_files(const std::string& directory) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(directory, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) == 0 && name.size() > sizeof(kPrefix) - 1 + sizeof(kSuffix) - 1 &&
        name.compare(name.size() - (sizeof(kSuffix) - 1), sizeof(kSuffix) - 1, kSuffix) == 0) {
      found.push_back(entry.path().string());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

std::string first_non_finite(const torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters()) {
    if (item.value().is_floating_point() && !torch::isfinite(item.value()).all().item<bool>()) return item.key();
  }
  for (const auto& item : model.named_buffers()) {
    if (item.value().is_floating_point() && !torch::isfinite(item.value()).all().item<bool>()) return item.key();
  }
  return "";
}

Checkpointer::Checkpointer(std::string directory, int keep_last)
    : directory_(std::move(directory)), keep_last_(std::max(1, keep_last)) {}

std::string Checkpointer::save(const torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                               const TrainingProgress& progress, ProcessGroup* group) {
  std::string path = (fs::path(directory_) / file_name(progress.step)).string();
  std::exception_ptr failure;
  // What rank 0 tells the others: 0 written, else the kind of its error.
  enum Outcome : int { kWritten = 0, kIoFailure = 1, kRefused = 2 };
  int outcome = kWritten;
  if (!group || group->rank() == 0) {
    try {
      tidy();
      const std::string bad = first_non_finite(model);
      if (!bad.empty()) {
        outcome = kRefused;
        throw InvalidArgumentError(str_cat("checkpoint at step ", progress.step, " not written to ", directory_, ": ",
                                           bad,
                                           " holds NaN or inf (training diverged; the newest finite checkpoint "
                                           "stays: lower the learning rate and resume from it)"));
      }
      fs::create_directories(directory_);
      const std::vector<char> bytes = serialize_checkpoint(model, optimizer, progress);
      write_file_atomically(path, bytes.data(), bytes.size(), "checkpoint");
      std::ostringstream sidecar;
      sidecar << std::hex << crc_of(bytes) << std::dec << " " << bytes.size() << "\n";
      try {
        write_file_atomically(path + kSidecar, sidecar.str(), "checkpoint");
      } catch (...) {
        // A full disk takes the small file after the big one: the data file goes too, so that
        // the directory holds no checkpoint of this step (and a resume uses the one before).
        std::error_code ignored;
        fs::remove(path, ignored);
        throw;
      }
      // Older checkpoints beyond keep_last go, those without a sidecar too (they load): the
      // data file first, so that a removal cut short never leaves an old data file behind.
      const std::vector<std::string> files = checkpoint_files(directory_);
      for (size_t i = 0; i + keep_last_ < files.size(); ++i) {
        std::error_code ignored;
        fs::remove(files[i], ignored);
        fs::remove(files[i] + kSidecar, ignored);
      }
    } catch (...) {
      failure = std::current_exception();
      if (outcome == kWritten) outcome = kIoFailure;  // anything but the refusal above
    }
  }
  // The others wait for rank 0 even when it failed, and then fail too: a job whose checkpoint
  // was not written stops on every rank, not only on the one that writes.
  if (group) {
    at::Tensor told = at::tensor({outcome}, at::kInt);
    group->allreduce(told, ReduceOp::kMax);
    outcome = told.item<int>();
  }
  if (failure) std::rethrow_exception(failure);
  if (outcome == kRefused) {
    throw InvalidArgumentError(
        str_cat("checkpoint at step ", progress.step, ": rank 0 refused to write it (the model holds NaN or inf)"),
        FailureSite{group->rank(), 0, "checkpoint"});
  }
  if (outcome != kWritten) {
    throw IoError(str_cat("checkpoint at step ", progress.step, ": rank 0 could not write it to ", directory_,
                          " (its error says why)"),
                  FailureSite{group->rank(), 0, "checkpoint"});
  }
  return path;
}

void Checkpointer::tidy() {
  if (tidied_) return;
  tidied_ = true;
  for (const std::string& path : remove_stale_temporaries(directory_)) {
    log_warning(str_cat("removed ", path, ": the temporary file of a checkpoint write that did not finish"));
  }
}

std::vector<std::string> Checkpointer::all_files() const { return checkpoint_files(directory_); }

std::vector<std::string> Checkpointer::list() const {
  std::vector<std::string> complete;
  for (const std::string& path : checkpoint_files(directory_)) {
    if (fs::exists(path + kSidecar)) complete.push_back(path);
  }
  return complete;
}

std::optional<TrainingProgress> Checkpointer::load_latest(torch::nn::Module& model,
                                                          torch::optim::Optimizer* optimizer) {
  tidy();
  std::vector<std::string> candidates = checkpoint_files(directory_);
  std::reverse(candidates.begin(), candidates.end());  // newest first
  for (const auto& path : candidates) {
    // No checksum file: written by another program (Python's torch.save), or by a writer stopped
    // between the data file's rename and the checksum's (a whole file: it was renamed into
    // place). It is read with its structure checked as every file's is: a truncated one has no
    // zip directory at its end, and is skipped.
    const bool has_sidecar = fs::exists(path + kSidecar);
    std::string why;
    try {
      const std::vector<char> bytes = read_file(path);
      if (has_sidecar) why = verify(path, bytes);
      if (why.empty()) {
        TrainingProgress progress = restore_checkpoint(bytes, path, model, optimizer);
        if (!has_sidecar) {
          log_warning(str_cat("checkpoint ", path, " has no checksum file ", path, kSidecar,
                              " (saved by another program, such as Python's torch.save, or its writer stopped "
                              "before the checksum): loaded with its structure checked, its bytes unverified"));
        }
        return progress;
      }
    } catch (const InvalidArgumentError&) {
      throw;  // a whole checkpoint of another model: falling back would hide it
    } catch (const std::exception& e) {
      why = e.what();
      const std::string named = "checkpoint " + path + ": ";  // the warning names the file already
      if (why.rfind(named, 0) == 0) why.erase(0, named.size());
      if (!has_sidecar) why += " (it has no checksum file)";
    }
    log_warning(str_cat("skipping checkpoint ", path, ": ", why, "; trying the previous one"));
  }
  if (!candidates.empty()) {
    // Starting over silently would pass for a resume: the caller asked for one and has work here.
    throw IoError(str_cat("none of the ", candidates.size(), " checkpoints in ", directory_,
                          " could be loaded (each is named above with why); move them away to start from scratch"));
  }
  return std::nullopt;
}

TrainingProgress load_checkpoint_file(const std::string& path, torch::nn::Module& model,
                                      torch::optim::Optimizer* optimizer) {
  return restore_checkpoint(read_file(path), path, model, optimizer);
}

std::string load_state_dict_file(const std::string& path, torch::nn::Module& model) {
  return restore_state_dict(read_file(path), path, model);
}

}  // namespace ringtorch
