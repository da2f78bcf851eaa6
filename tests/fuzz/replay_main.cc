// A main for the fuzz targets in builds without libFuzzer (any compiler): runs every file named
// on the command line, or found in a directory named there, through LLVMFuzzerTestOneInput once.
// CTest's fuzz_corpus runs the committed corpus this way, so the inputs the fuzzers found stay
// tested on every build; scripts/fuzz.sh does the fuzzing itself, with clang.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

void run_file(const std::filesystem::path& path, int& count) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "fuzz replay: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  ++count;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int count = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path path = argv[i];
    if (std::filesystem::is_directory(path)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(path)) files.push_back(entry.path());
      std::sort(files.begin(), files.end());
      for (const auto& file : files) run_file(file, count);
    } else {
      run_file(path, count);
    }
  }
  std::printf("%s: %d inputs, none crashed\n", argv[0], count);
  return 0;
}
