#include "runtime/training/optimizer_state.h"

#include <ATen/core/Dict.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <memory>
#include <sstream>
#include <vector>

#include <ringtorch/error.h>
#include <ringtorch/str_cat.h>

#include "runtime/training/pickle_check.h"

namespace ringtorch {
namespace {

using torch::optim::OptimizerParamState;
using Fields = c10::impl::GenericDict;

// LibTorch keys its state by the parameter's TensorImpl: as text in 1.x, as the pointer in 2.x.
template <typename Map>
typename Map::key_type state_key(const Map&, const at::Tensor& parameter) {
  if constexpr (std::is_same_v<typename Map::key_type, std::string>) {
    std::ostringstream text;  // what c10::guts::to_string wrote
    text << static_cast<const void*>(parameter.unsafeGetTensorImpl());
    return text.str();
  } else {
    return static_cast<typename Map::key_type>(parameter.unsafeGetTensorImpl());
  }
}

std::vector<at::Tensor> parameters_of(const torch::optim::Optimizer& optimizer) {
  std::vector<at::Tensor> parameters;
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) parameters.push_back(p);
  }
  return parameters;
}

// Reading one parameter's fields, every failure naming the file, the parameter and the field.
class FieldReader {
 public:
  FieldReader(const Fields& fields, const at::Tensor& parameter, std::string where)
      : fields_(fields), parameter_(parameter), where_(std::move(where)) {}

  // A tensor of the parameter's shape; an undefined tensor when absent and optional.
  at::Tensor tensor(const char* name, bool required = true) {
    ++used_;
    if (!fields_.contains(name)) {
      --used_;
      if (required) fail(str_cat("has no '", name, "'"));
      return {};
    }
    const c10::IValue& value = fields_.at(name);
    if (!value.isTensor()) fail(str_cat("'", name, "' is not a tensor"));
    at::Tensor t = value.toTensor();
    check_tensor_within_storage(t, str_cat(where_, " field '", name, "'"));
    if (t.sizes() != parameter_.sizes()) {
      fail(str_cat("'", name, "' has shape ", t.sizes(), ", the parameter ", parameter_.sizes()));
    }
    return t.to(parameter_.options()).contiguous();
  }

  int64_t step(const char* name = "step") {
    ++used_;
    if (!fields_.contains(name) || !fields_.at(name).isInt() || fields_.at(name).toInt() < 0) {
      fail(str_cat("has no non-negative integer '", name, "'"));
    }
    return fields_.at(name).toInt();
  }

  // After the reads: no field the optimizer does not know.
  void no_others() {
    if (static_cast<size_t>(fields_.size()) != used_) fail("has fields this optimizer does not have");
  }

 private:
  [[noreturn]] void fail(const std::string& what) { throw IoError(str_cat(where_, " ", what)); }

  const Fields& fields_;
  const at::Tensor& parameter_;
  std::string where_;
  size_t used_ = 0;
};

Fields new_fields() { return Fields(c10::StringType::get(), c10::AnyType::get()); }

void put(Fields& fields, const char* name, const at::Tensor& t) {
  if (t.defined()) fields.insert(name, t.detach().cpu());
}

// One supported optimizer: how to recognize it, and its param state to fields and back.
struct Kind {
  const char* name;
  bool (*is)(const torch::optim::Optimizer&);
  Fields (*save)(const OptimizerParamState&);
  std::unique_ptr<OptimizerParamState> (*load)(FieldReader&);
};

template <typename T>
bool is_a(const torch::optim::Optimizer& optimizer) {
  return dynamic_cast<const T*>(&optimizer) != nullptr;
}

template <typename State>
const State& as(const OptimizerParamState& state) {
  return dynamic_cast<const State&>(state);
}

// Adam and AdamW keep the same fields in two param-state classes.
template <typename State>
Fields save_adam_like(const OptimizerParamState& s) {
  const auto& a = as<State>(s);
  Fields f = new_fields();
  f.insert("step", a.step());
  put(f, "exp_avg", a.exp_avg());
  put(f, "exp_avg_sq", a.exp_avg_sq());
  put(f, "max_exp_avg_sq", a.max_exp_avg_sq());
  return f;
}

template <typename State>
std::unique_ptr<OptimizerParamState> load_adam_like(FieldReader& r) {
  auto s = std::make_unique<State>();
  s->step(r.step());
  s->exp_avg(r.tensor("exp_avg"));
  s->exp_avg_sq(r.tensor("exp_avg_sq"));
  s->max_exp_avg_sq(r.tensor("max_exp_avg_sq", /*required=*/false));
  return s;
}

const Kind kKinds[] = {
    {"sgd", is_a<torch::optim::SGD>,
     [](const OptimizerParamState& s) {
       Fields f = new_fields();
       put(f, "momentum_buffer", as<torch::optim::SGDParamState>(s).momentum_buffer());
       return f;
     },
     [](FieldReader& r) -> std::unique_ptr<OptimizerParamState> {
       auto s = std::make_unique<torch::optim::SGDParamState>();
       s->momentum_buffer(r.tensor("momentum_buffer"));
       return s;
     }},
    {"adam", is_a<torch::optim::Adam>, save_adam_like<torch::optim::AdamParamState>,
     load_adam_like<torch::optim::AdamParamState>},
    {"adamw", is_a<torch::optim::AdamW>, save_adam_like<torch::optim::AdamWParamState>,
     load_adam_like<torch::optim::AdamWParamState>},
    {"adagrad", is_a<torch::optim::Adagrad>,
     [](const OptimizerParamState& s) {
       const auto& a = as<torch::optim::AdagradParamState>(s);
       Fields f = new_fields();
       f.insert("step", a.step());
       put(f, "sum", a.sum());
       return f;
     },
     [](FieldReader& r) -> std::unique_ptr<OptimizerParamState> {
       auto s = std::make_unique<torch::optim::AdagradParamState>();
       s->step(r.step());
       s->sum(r.tensor("sum"));
       return s;
     }},
    {"rmsprop", is_a<torch::optim::RMSprop>,
     [](const OptimizerParamState& s) {
       const auto& a = as<torch::optim::RMSpropParamState>(s);
       Fields f = new_fields();
       f.insert("step", a.step());
       put(f, "square_avg", a.square_avg());
       put(f, "momentum_buffer", a.momentum_buffer());
       put(f, "grad_avg", a.grad_avg());
       return f;
     },
     [](FieldReader& r) -> std::unique_ptr<OptimizerParamState> {
       auto s = std::make_unique<torch::optim::RMSpropParamState>();
       s->step(r.step());
       s->square_avg(r.tensor("square_avg"));
       s->momentum_buffer(r.tensor("momentum_buffer", /*required=*/false));
       s->grad_avg(r.tensor("grad_avg", /*required=*/false));
       return s;
     }},
};

const Kind* kind_of(const torch::optim::Optimizer& optimizer) {
  for (const Kind& kind : kKinds) {
    if (kind.is(optimizer)) return &kind;
  }
  return nullptr;
}

}  // namespace

c10::IValue optimizer_state_dict(const torch::optim::Optimizer& optimizer) {
  const Kind* kind = kind_of(optimizer);
  if (!kind) {
    throw InvalidArgumentError(
        "checkpoint: the state of this optimizer cannot be saved (SGD, Adam, AdamW, Adagrad and RMSprop can); "
        "save without the optimizer to keep the weights only");
  }
  Fields parameters = new_fields();
  const std::vector<at::Tensor> params = parameters_of(optimizer);
  const auto& state = optimizer.state();
  for (size_t i = 0; i < params.size(); ++i) {
    const auto found = state.find(state_key(state, params[i]));
    if (found != state.end() && found->second) parameters.insert(std::to_string(i), kind->save(*found->second));
  }
  Fields dict = new_fields();
  dict.insert("kind", std::string(kind->name));
  dict.insert("parameters", parameters);
  return dict;
}

OptimizerStateMap parse_optimizer_state(const torch::optim::Optimizer& optimizer, const c10::IValue& value,
                                        const std::string& path) {
  const Kind* kind = kind_of(optimizer);
  const std::string where = str_cat("checkpoint ", path, ": the optimizer state");
  if (!value.isGenericDict()) throw IoError(where + " is not a dict");
  const Fields dict = value.toGenericDict();
  if (!dict.contains("kind") || !dict.at("kind").isString() || !dict.contains("parameters") ||
      !dict.at("parameters").isGenericDict()) {
    throw IoError(where + " has no 'kind' and 'parameters'");
  }
  const std::string saved_kind = dict.at("kind").toStringRef();
  if (!kind || saved_kind != kind->name) {
    throw InvalidArgumentError(str_cat(where, " is ", saved_kind, "'s, the optimizer is ",
                                       kind ? kind->name : "of another kind",
                                       " (was it saved with another optimizer?)"));
  }
  const std::vector<at::Tensor> params = parameters_of(optimizer);
  OptimizerStateMap map;
  for (const auto& entry : dict.at("parameters").toGenericDict()) {
    const std::string index = entry.key().isString() ? entry.key().toStringRef() : std::string();
    size_t i = params.size();
    if (!index.empty() && index.size() <= 9 && index.find_first_not_of("0123456789") == std::string::npos) {
      i = std::stoul(index);
    }
    if (i >= params.size()) {
      throw InvalidArgumentError(str_cat(where, " names parameter '", index, "'; the optimizer has ", params.size(),
                                         " (was it saved with other parameter groups?)"));
    }
    if (!entry.value().isGenericDict()) throw IoError(str_cat(where, " of parameter ", i, " is not a dict"));
    const Fields fields = entry.value().toGenericDict();
    FieldReader reader(fields, params[i], str_cat(where, " of parameter ", i));
    std::unique_ptr<OptimizerParamState> state = kind->load(reader);
    reader.no_others();
    map[state_key(map, params[i])] = std::move(state);
  }
  return map;
}

}  // namespace ringtorch
