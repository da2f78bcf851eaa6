// The header examples' check runs when they compile (header_examples.cc is generated from the
// headers at build time); this program only lists what was compiled, and fails when the
// generator found nothing, which would mean the markers were lost.
#include <cstdio>

extern const char* const kHeaderExamples[];
extern const int kHeaderExampleCount;

int main() {
  for (int i = 0; i < kHeaderExampleCount; ++i) std::printf("compiled: %s\n", kHeaderExamples[i]);
  std::printf("%d header examples compiled\n", kHeaderExampleCount);
  return kHeaderExampleCount > 0 ? 0 : 1;
}
