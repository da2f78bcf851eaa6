#include <algorithm>
#include <cmath>
#include <numeric>

#include <ringtorch/batch_split.h>
#include <ringtorch/error.h>

#include "base/parse.h"

namespace ringtorch {

std::vector<int64_t> split_global_batch(int64_t global_batch, const std::vector<double>& weights) {
  if (weights.empty()) throw InvalidArgumentError("split_global_batch: no weights (one per rank)");
  double total = 0;
  int positive = 0;
  for (size_t r = 0; r < weights.size(); ++r) {
    if (!std::isfinite(weights[r]) || weights[r] < 0) {
      throw InvalidArgumentError(str_cat("the weight of rank ", r, " is ", weights[r], "; weights must be >= 0"));
    }
    total += weights[r];
    positive += weights[r] > 0;
  }
  if (positive == 0) throw InvalidArgumentError("every rank's weight is 0: at least one rank must take samples");
  if (global_batch < positive) {
    throw InvalidArgumentError(str_cat("a global batch of ", global_batch, " cannot give each of the ", positive,
                                       " ranks with a weight at least one sample; raise the batch size"));
  }
  const size_t n = weights.size();
  std::vector<int64_t> share(n);
  std::vector<double> remainder(n);
  int64_t dealt = 0;
  for (size_t r = 0; r < n; ++r) {
    const double quota = static_cast<double>(global_batch) * weights[r] / total;
    share[r] = static_cast<int64_t>(std::floor(quota));
    remainder[r] = quota - static_cast<double>(share[r]);
    dealt += share[r];
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return remainder[a] > remainder[b]; });
  for (size_t k = 0; dealt < global_batch; k = (k + 1) % n) {
    if (weights[order[k]] == 0) continue;
    ++share[order[k]];
    ++dealt;
  }
  // At least one sample for every rank that has a weight, from the largest share.
  for (size_t r = 0; r < n; ++r) {
    if (weights[r] == 0 || share[r] > 0) continue;
    const size_t largest = static_cast<size_t>(std::max_element(share.begin(), share.end()) - share.begin());
    --share[largest];
    ++share[r];
  }
  return share;
}

std::vector<double> parse_weights(const std::string& text) {
  std::vector<double> weights;
  size_t start = 0;
  for (;;) {
    const size_t colon = text.find(':', start);
    const std::string part = text.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    const double w = parse_number(part, "a weight in '" + text + "'");
    if (!std::isfinite(w) || w < 0) {
      throw InvalidArgumentError(str_cat("weights '", text, "': ", part, " is not a number >= 0"));
    }
    weights.push_back(w);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return weights;
}

}  // namespace ringtorch
