#include "models/mlp.h"

namespace ringtorch {

MlpImpl::MlpImpl(const ImageShape& input) {
  fc = register_module("fc", torch::nn::Linear(input.channels * input.height * input.width, input.classes));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) { return fc->forward(x.flatten(1)); }

}  // namespace ringtorch
