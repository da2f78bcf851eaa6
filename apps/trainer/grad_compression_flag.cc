#include "apps/trainer/grad_compression_flag.h"

#include <ringtorch/error.h>

#include "base/parse.h"

namespace ringtorch {
namespace {

constexpr int kMaxRank = 1024;

}  // namespace

std::string GradCompression::describe() const { return kind == "powersgd" ? str_cat(kind, ":", rank) : kind; }

GradCompression parse_grad_compression(const std::string& value) {
  GradCompression choice;
  const size_t colon = value.find(':');
  const std::string kind = value.substr(0, colon);
  if ((kind == "none" || kind == "fp16" || kind == "bf16") && colon == std::string::npos) {
    choice.kind = kind;
    return choice;
  }
  if (kind == "powersgd") {
    choice.kind = kind;
    if (colon == std::string::npos) return choice;
    try {
      choice.rank = parse_int_in_range(value.substr(colon + 1), 1, kMaxRank, "RANK");
      return choice;
    } catch (const InvalidArgumentError&) {
      // the message below names the flag and every accepted form
    }
  }
  throw InvalidArgumentError(str_cat("--grad-compression ", value,
                                     ": accepted forms are none, fp16, bf16, powersgd and powersgd:RANK (RANK from 1 "
                                     "to ",
                                     kMaxRank, ", the matrix approximation rank; powersgd alone is powersgd:4)"));
}

}  // namespace ringtorch
