#include "models/mlp.h"

namespace ringtorch {

MlpImpl::MlpImpl() { fc = register_module("fc", torch::nn::Linear(784, 10)); }

torch::Tensor MlpImpl::forward(const torch::Tensor& x) { return fc->forward(x.flatten(1)); }

}  // namespace ringtorch
