// ringtrain's --grad-compression none|fp16|bf16|powersgd[:RANK]: its forms, parsed without
// LibTorch (job_config.h and the job config fuzzer use it). grad_compression.h makes the hook.
#pragma once

#include <string>

namespace ringtorch {

struct GradCompression {
  std::string kind = "none";     // none | fp16 | bf16 | powersgd
  int rank = 4;                  // powersgd's matrix approximation rank
  std::string describe() const;  // "none", "fp16", "powersgd:4"
};

// Throws InvalidArgumentError naming --grad-compression and the accepted forms.
GradCompression parse_grad_compression(const std::string& value);

}  // namespace ringtorch
