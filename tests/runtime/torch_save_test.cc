// What Python's torch.save writes, read in C++ (checkpoint_format.h): every case
// tests/runtime/torch_save_cases.py writes (one-entry dicts, OrderedDict state_dicts, optimizer
// state_dicts, protocols 2-5, the dtypes, views, torch 2.x's archive layout), a ringtorch
// checkpoint Python loaded and saved again resuming with its optimizer state, and a Python
// state_dict starting a model (--init-from's path), strictly. Skipped without Debian's
// python3-torch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <ringtorch/checkpoint.h>
#include <ringtorch/error.h>

#include "runtime/comm/tensor_checks.h"
#include "runtime/test_net.h"
#include "support/stderr_capture.h"
#include "support/test_paths.h"

namespace ringtorch {
namespace {

namespace fs = std::filesystem;

const char kCases[] = "/usr/bin/python3 " RINGTORCH_SOURCE_DIR "/tests/runtime/torch_save_cases.py ";

bool have_python_torch() {
  return fs::exists("/usr/bin/python3") && std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") == 0;
}

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

std::string number(double v) {
  char text[64];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

// The value as torch_save_cases.py's describe() writes it.
std::string describe(const c10::IValue& v) {
  std::string out;
  auto join = [&](const auto& items, const char* open, const char* close, auto&& one) {
    out += open;
    bool first = true;
    for (const auto& item : items) {
      if (!first) out += ", ";
      first = false;
      one(item);
    }
    out += close;
  };
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    std::ostringstream shape;
    shape << t.sizes();
    out = dtype_name(t.scalar_type()) + shape.str() + number(t.to(at::kDouble).sum().item<double>());
  } else if (v.isGenericDict()) {
    join(v.toGenericDict(), "{", "}", [&](const auto& e) { out += describe(e.key()) + ": " + describe(e.value()); });
  } else if (v.isList()) {
    join(v.toListRef(), "[", "]", [&](const c10::IValue& e) { out += describe(e); });
  } else if (v.isTuple()) {
    join(v.toTupleRef().elements(), "(", ")", [&](const c10::IValue& e) { out += describe(e); });
  } else if (v.isBool()) {
    out = v.toBool() ? "True" : "False";
  } else if (v.isNone()) {
    out = "None";
  } else if (v.isDouble()) {
    out = number(v.toDouble());
  } else if (v.isInt()) {
    out = std::to_string(v.toInt());
  } else if (v.isString()) {
    out = v.toStringRef();
  } else {
    out = std::string("?") + v.tagKind();
  }
  return out;
}

TEST(TorchSave, EveryCasePythonWritesReadsBackTheSame) {
  if (!have_python_torch()) GTEST_SKIP() << "Debian's python3-torch is not installed";
  testing::TempDir dir;
  const std::string command = kCases + std::string("cases ") + dir.path();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream expected(dir.file("expected.txt"));
  int cases = 0;
  for (std::string name, value; expected >> name && std::getline(expected, value); ++cases) {
    value.erase(0, 1);  // the space after the name
    const std::string path = dir.file(name + ".pt");
    try {
      EXPECT_EQ(describe(read_torch_save(bytes_of(path), path)), value) << name;
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << ": " << e.what();
    }
  }
  EXPECT_EQ(cases, 14);
}

// The case: a checkpoint loaded in Python and saved again with torch.save (its SGD
// state holds one-entry dicts, pickled with SETITEM; no checksum file) resumes with the same
// weights, position and momentum, and says that its bytes were not verified.
TEST(TorchSave, ACheckpointPythonSavedAgainResumesWithItsOptimizer) {
  if (!have_python_torch()) GTEST_SKIP() << "Debian's python3-torch is not installed";
  testing::TempDir ours, theirs;
  Net net;
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  sgd.zero_grad();
  net->forward(torch::randn({4, 8})).pow(2).sum().backward();
  sgd.step();
  const std::string saved =
      Checkpointer(ours.path()).save(*net, &sgd, TrainingProgress{2, 30, 8, {{"model", "net"}}, {}});
  const std::string resaved = theirs.file(fs::path(saved).filename().string());
  const std::string command = kCases + std::string("resave ") + saved + " " + resaved;
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  Net fresh;
  torch::optim::SGD fresh_sgd(fresh->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  testing::StderrCapture warnings;
  const auto resumed = Checkpointer(theirs.path()).load_latest(*fresh, &fresh_sgd);
  const std::string text = warnings.finish();
  ASSERT_TRUE(resumed.has_value()) << text;
  EXPECT_EQ(resumed->epoch, 2);
  EXPECT_EQ(resumed->step, 30);
  EXPECT_EQ(resumed->samples_in_epoch, 8);
  EXPECT_EQ(resumed->metadata.at("model"), "net");
  auto a = net->named_parameters(), b = fresh->named_parameters();
  for (const auto& item : a) EXPECT_TRUE(at::equal(b[item.key()], item.value())) << item.key();
  ASSERT_EQ(fresh_sgd.state().size(), sgd.state().size());
  const auto momentum = [](torch::optim::SGD& optimizer, const at::Tensor& parameter) {
    const auto& state = optimizer.state().at(c10::guts::to_string(parameter.unsafeGetTensorImpl()));
    return static_cast<const torch::optim::SGDParamState&>(*state).momentum_buffer();
  };
  const auto mine = net->parameters(), restored = fresh->parameters();
  for (size_t i = 0; i < mine.size(); ++i)
    EXPECT_TRUE(at::equal(momentum(fresh_sgd, restored[i]), momentum(sgd, mine[i])));
  EXPECT_NE(text.find("has no checksum file"), std::string::npos) << text;
}

// --init-from's path: a state_dict Python saved from a DDP-wrapped model ("module.fc1.weight")
// loads by the names without "module.", strictly; another shape is refused, naming the entry,
// and leaves the model as it was.
TEST(TorchSave, APythonStateDictStartsTheModelStrictly) {
  if (!have_python_torch()) GTEST_SKIP() << "Debian's python3-torch is not installed";
  testing::TempDir dir;
  const std::string fits = dir.file("fits.pt"), other = dir.file("other.pt");
  for (const auto& [path, out] : {std::pair<std::string, int>{fits, 4}, {other, 5}}) {
    const std::string command = kCases + std::string("state_dict ") + path + " " + std::to_string(out);
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  Net net;
  EXPECT_EQ(load_state_dict_file(fits, *net), "the state_dict, without the 'module.' of a wrapped model's names");
  // Python's order: steps (the module's own buffer first), fc1.weight, fc1.bias, fc2.weight,
  // fc2.bias; each filled with its index + 0.5.
  EXPECT_TRUE(at::equal(net->named_buffers()["steps"], at::full({1}, 0.5f)));
  EXPECT_TRUE(at::equal(net->fc1->weight, at::full({16, 8}, 1.5f)));
  EXPECT_TRUE(at::equal(net->fc2->bias, at::full({4}, 4.5f)));

  Net untouched;
  const at::Tensor before = untouched->fc1->weight.detach().clone();
  try {
    load_state_dict_file(other, *untouched);
    ADD_FAILURE() << "a state_dict of another shape loaded";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("'fc2.weight' has shape [5, 16], the model [4, 16]"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(at::equal(untouched->fc1->weight, before));
}

}  // namespace
}  // namespace ringtorch
