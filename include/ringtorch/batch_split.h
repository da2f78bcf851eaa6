// split_global_batch: how a global batch of B samples is dealt out to ranks of unequal speed.
// Rank r gets b_r samples per step, integers that sum to B, in proportion to its weight w_r:
// largest-remainder rounding of B * w_r / sum(w) (ties to the lower rank), then every rank
// with a positive weight gets at least one sample (taken from the largest share, the lowest
// rank among equals); a rank of weight 0 gets none.
//
// Example:
//   std::vector<int64_t> batches = ringtorch::split_global_batch(64, {3, 1});  // {48, 16}
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringtorch {

// Throws InvalidArgumentError naming the problem: no weights, a negative or non-finite weight,
// all weights 0, B < 1, or B smaller than the number of ranks with a positive weight.
std::vector<int64_t> split_global_batch(int64_t global_batch, const std::vector<double>& weights);

// "3:1" -> {3, 1}: weights as ringtrain's --balance takes them. Throws InvalidArgumentError for
// anything but positive-or-zero numbers separated by ':'.
std::vector<double> parse_weights(const std::string& text);

}  // namespace ringtorch
