#include "apps/trainer/grad_compression_flag.h"

#include <ringtorch/error.h>

namespace ringtorch {
namespace {

constexpr int kMaxRank = 1024;

bool all_digits(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

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
    const std::string rank = value.substr(colon + 1);
    if (all_digits(rank) && rank.size() <= 4 && std::stoi(rank) >= 1 && std::stoi(rank) <= kMaxRank) {
      choice.rank = std::stoi(rank);
      return choice;
    }
  }
  throw InvalidArgumentError(str_cat("--grad-compression ", value,
                                     ": accepted forms are none, fp16, bf16, powersgd and powersgd:RANK (RANK from 1 "
                                     "to ",
                                     kMaxRank, ", the matrix approximation rank; powersgd alone is powersgd:4)"));
}

}  // namespace ringtorch
