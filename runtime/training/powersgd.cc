#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <ringtorch/error.h>
#include <ringtorch/powersgd.h>

#include "base/log.h"
#include "runtime/training/powersgd_kernels.h"

namespace ringtorch {
namespace {

// Which members of a bucket are compressed, and where their P and Q live: P's of all compressed
// members follow the uncompressed members in one buffer (one all-reduce), Q's are back to back
// in their own.
struct BucketLayout {
  struct Matrix {
    size_t member;
    int64_t rows, cols, rank;
    int64_t p_offset, q_offset;  // p_offset counts from the start of the shared buffer
  };
  std::vector<size_t> uncompressed;
  std::vector<Matrix> matrices;
  int64_t uncompressed_elements = 0, p_elements = 0, q_elements = 0;
};

BucketLayout plan_bucket(const GradBucket& bucket, const PowerSgdOptions& o) {
  BucketLayout layout;
  std::vector<BucketLayout::Matrix> matrices;
  for (size_t k = 0; k < bucket.members.size(); ++k) {
    const auto& m = bucket.members[k];
    if (m.shape.size() >= 2 && m.numel > 0) {
      const int64_t rows = m.shape[0], cols = m.numel / rows;
      const int64_t rank = std::min<int64_t>({rows, cols, o.matrix_approximation_rank});
      if (static_cast<double>((rows + cols) * rank) * o.min_compression_rate < static_cast<double>(rows * cols)) {
        matrices.push_back({k, rows, cols, rank, 0, 0});
        continue;
      }
    }
    layout.uncompressed.push_back(k);
    layout.uncompressed_elements += m.numel;
  }
  for (auto& matrix : matrices) {
    matrix.p_offset = layout.uncompressed_elements + layout.p_elements;
    matrix.q_offset = layout.q_elements;
    layout.p_elements += matrix.rows * matrix.rank;
    layout.q_elements += matrix.cols * matrix.rank;
  }
  layout.matrices = std::move(matrices);
  return layout;
}

// Modified Gram-Schmidt on the columns of a row-major rows x rank float matrix, in place, in
// plain loops: for the small matrices PowerSGD makes, tensor operations (the way below) cost more
// than the arithmetic.
void orthogonalize_floats(float* m, int64_t rows, int64_t rank, double epsilon) {
  for (int64_t i = 0; i < rank; ++i) {
    double norm = 0;
    for (int64_t r = 0; r < rows; ++r) norm += static_cast<double>(m[r * rank + i]) * m[r * rank + i];
    norm = std::sqrt(norm);
    const double divisor =
        epsilon == 0 ? std::max(norm, static_cast<double>(std::numeric_limits<float>::min())) : norm + epsilon;
    for (int64_t r = 0; r < rows; ++r) m[r * rank + i] = static_cast<float>(m[r * rank + i] / divisor);
    for (int64_t j = i + 1; j < rank; ++j) {
      double dot = 0;
      for (int64_t r = 0; r < rows; ++r) dot += static_cast<double>(m[r * rank + i]) * m[r * rank + j];
      for (int64_t r = 0; r < rows; ++r) m[r * rank + j] = static_cast<float>(m[r * rank + j] - dot * m[r * rank + i]);
    }
  }
}

// Modified Gram-Schmidt on the columns of `m` (rows x rank), in place. A zero column stays zero
// (PyTorch's would become NaN with epsilon 0).
void orthogonalize(const at::Tensor& m, double epsilon) {
  if (m.device().is_cpu() && m.scalar_type() == at::kFloat && m.is_contiguous()) {
    orthogonalize_floats(m.data_ptr<float>(), m.size(0), m.size(1), epsilon);
    return;
  }
  const int64_t rank = m.size(1);
  for (int64_t i = 0; i < rank; ++i) {
    at::Tensor column = m.narrow(1, i, 1);
    at::Tensor norm = column.norm();
    if (epsilon == 0) {
      column.div_(at::where(norm > 0, norm, at::ones_like(norm)));  // a zero column divided by 1
    } else {
      column.div_(norm + epsilon);
    }
    if (i + 1 < rank) {
      at::Tensor rest = m.narrow(1, i + 1, rank - i - 1);
      rest.sub_((column * rest).sum(0, /*keepdim=*/true) * column);
    }
  }
}

at::Tensor q_view(const at::Tensor& q, const BucketLayout::Matrix& matrix) {
  return q.narrow(0, matrix.q_offset, matrix.cols * matrix.rank).view({matrix.cols, matrix.rank});
}
at::Tensor p_view(const at::Tensor& shared, const BucketLayout::Matrix& matrix) {
  return shared.narrow(0, matrix.p_offset, matrix.rows * matrix.rank).view({matrix.rows, matrix.rank});
}
// The matrix's member in `flat`, a tensor laid out as the bucket's buffer.
at::Tensor matrix_view(const at::Tensor& flat, const GradBucket& bucket, const BucketLayout::Matrix& matrix) {
  const auto& member = bucket.members[matrix.member];
  return flat.narrow(0, member.offset, member.numel).view({matrix.rows, matrix.cols});
}

// float32 in CPU memory: the products take powersgd_kernels.h's one-pass loops, and the members'
// copies and sums plain loops over pointers (a tensor operation per member costs more than a
// small model's products); else tensor operations.
bool on_cpu_in_float(const at::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == at::kFloat; }

enum class RangeOp { kCopy, kAdd, kSubtract };

// dst[dst_at, +n) = / += / -= src[src_at, +n), then divided by `divisor`; both flat.
void range_op(RangeOp op, const at::Tensor& dst, int64_t dst_at, const at::Tensor& src, int64_t src_at, int64_t n,
              int divisor = 1) {
  if (on_cpu_in_float(dst) && on_cpu_in_float(src)) {
    float* d = dst.data_ptr<float>() + dst_at;
    const float* from = src.data_ptr<float>() + src_at;
    const float by = static_cast<float>(divisor);
    for (int64_t k = 0; k < n; ++k) {
      const float value = op == RangeOp::kCopy ? from[k] : op == RangeOp::kAdd ? d[k] + from[k] : d[k] - from[k];
      d[k] = divisor == 1 ? value : value / by;
    }
    return;
  }
  at::Tensor target = dst.narrow(0, dst_at, n), source = src.narrow(0, src_at, n);
  if (op == RangeOp::kCopy) target.copy_(source);
  if (op == RangeOp::kAdd) target.add_(source);
  if (op == RangeOp::kSubtract) target.sub_(source);
  if (divisor != 1) target.div_(divisor);
}

// The bucket member's first float in `flat` (laid out as the bucket), P's and Q's of a matrix.
float* member_floats(const at::Tensor& flat, const GradBucket& bucket, const BucketLayout::Matrix& matrix) {
  return flat.data_ptr<float>() + bucket.members[matrix.member].offset;
}
float* p_floats(const at::Tensor& shared, const BucketLayout::Matrix& matrix) {
  return shared.data_ptr<float>() + matrix.p_offset;
}
float* q_floats(const at::Tensor& q, const BucketLayout::Matrix& matrix) {
  return q.data_ptr<float>() + matrix.q_offset;
}

// P = M Q for one matrix of the bucket (M from `input`, laid out as the bucket), after adding
// `gradient`'s matrix to the input's in the same pass when it is defined (CPU floats only).
void project(const at::Tensor& input, const at::Tensor& gradient, const GradBucket& bucket,
             const BucketLayout::Matrix& matrix, const at::Tensor& q, const at::Tensor& shared) {
  if (on_cpu_in_float(input)) {
    powersgd_kernels::add_and_multiply(
        member_floats(input, bucket, matrix), gradient.defined() ? member_floats(gradient, bucket, matrix) : nullptr,
        q_floats(q, matrix), p_floats(shared, matrix), matrix.rows, matrix.cols, matrix.rank);
    return;
  }
  at::Tensor p = p_view(shared, matrix);
  at::mm_out(p, matrix_view(input, bucket, matrix), q_view(q, matrix));
}

// Q = M^T P for one matrix.
void project_back(const at::Tensor& input, const GradBucket& bucket, const BucketLayout::Matrix& matrix,
                  const at::Tensor& q, const at::Tensor& shared) {
  if (on_cpu_in_float(input)) {
    powersgd_kernels::multiply_transposed(member_floats(input, bucket, matrix), p_floats(shared, matrix),
                                          q_floats(q, matrix), matrix.rows, matrix.cols, matrix.rank);
    return;
  }
  at::Tensor q_matrix = q_view(q, matrix);
  at::mm_out(q_matrix, matrix_view(input, bucket, matrix).t(), p_view(shared, matrix));
}

// The bucket's matrix = P Q^T; with error feedback the error (the input) loses it in the same pass.
void reconstruct(const GradBucket& bucket, const BucketLayout::Matrix& matrix, const at::Tensor& q,
                 const at::Tensor& shared, const at::Tensor& error) {
  if (on_cpu_in_float(bucket.buffer)) {
    powersgd_kernels::reconstruct(
        p_floats(shared, matrix), q_floats(q, matrix), member_floats(bucket.buffer, bucket, matrix),
        error.defined() ? member_floats(error, bucket, matrix) : nullptr, matrix.rows, matrix.cols, matrix.rank);
    return;
  }
  at::Tensor out = matrix_view(bucket.buffer, bucket, matrix);
  at::mm_out(out, p_view(shared, matrix), q_view(q, matrix).t());
  if (error.defined()) matrix_view(error, bucket, matrix).sub_(out);
}

// Orthogonalizes one matrix's P (in `shared`) or Q (in `q`).
void orthogonalize_p(const at::Tensor& shared, const BucketLayout::Matrix& matrix, double epsilon) {
  if (on_cpu_in_float(shared)) return orthogonalize_floats(p_floats(shared, matrix), matrix.rows, matrix.rank, epsilon);
  orthogonalize(p_view(shared, matrix), epsilon);
}
void orthogonalize_q(const at::Tensor& q, const BucketLayout::Matrix& matrix, double epsilon) {
  if (on_cpu_in_float(q)) return orthogonalize_floats(q_floats(q, matrix), matrix.cols, matrix.rank, epsilon);
  orthogonalize(q_view(q, matrix), epsilon);
}

// A saved tensor on the bucket's device and dtype, of the size the bucket needs; undefined, with a
// warning saying what replaces it, when its size does not fit (a state saved with another model,
// bucket size or rank: both Q and the error only refine what a step sends, so the step goes on
// rather than failing inside backward).
at::Tensor fitted(const at::Tensor& saved, int64_t elements, const at::Tensor& like, int rank, size_t bucket,
                  const char* what, const char* instead) {
  if (saved.numel() == elements && saved.dim() == 1 && saved.is_contiguous() && saved.device() == like.device() &&
      saved.scalar_type() == like.scalar_type()) {
    return saved;  // the usual case, every step: no tensor operation
  }
  if (saved.numel() != elements) {
    log_warning(str_cat("rank ", rank, ": PowerSGD: the saved state of bucket ", bucket, " holds ", what, " of ",
                        saved.numel(), " elements, this model's bucket needs ", elements,
                        " (was it saved with another model, bucket size or rank?); ", instead));
    return at::Tensor();
  }
  return saved.to(like.options()).reshape({elements}).contiguous();
}

}  // namespace

PowerSgdState::PowerSgdState(PowerSgdOptions options) : options_(options) {
  if (options_.matrix_approximation_rank < 1) {
    throw InvalidArgumentError(
        str_cat("PowerSGD: matrix_approximation_rank ", options_.matrix_approximation_rank, ": give 1 or more"));
  }
  if (options_.start_step < 0) {
    throw InvalidArgumentError(str_cat("PowerSGD: start_step ", options_.start_step, ": give 0 or more"));
  }
  if (!(options_.min_compression_rate >= 0) || !(options_.orthogonalization_epsilon >= 0)) {
    throw InvalidArgumentError("PowerSGD: min_compression_rate and orthogonalization_epsilon must be 0 or more");
  }
}

int64_t PowerSgdState::step() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return step_;
}
int64_t PowerSgdState::elements_before_compression() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return elements_before_;
}
int64_t PowerSgdState::elements_after_compression() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return elements_after_;
}

std::map<std::string, at::Tensor> PowerSgdState::state_dict() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<std::string, at::Tensor> state;
  state["step"] = at::full({1}, step_, at::kLong);
  for (const auto& [bucket, q] : q_) state[str_cat("q.", bucket)] = q.detach().cpu().clone();
  for (const auto& [bucket, e] : errors_) state[str_cat("error.", bucket)] = e.detach().cpu().clone();
  return state;
}

void PowerSgdState::load_state_dict(const std::map<std::string, at::Tensor>& state) {
  int64_t step = 0;
  std::map<size_t, at::Tensor> q, errors;
  for (const auto& [name, tensor] : state) {
    const auto bucket_of = [&](size_t prefix) {
      const std::string digits = name.substr(prefix);
      if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) {
        throw InvalidArgumentError(str_cat("PowerSGD state: unknown entry '", name, "'"));
      }
      return static_cast<size_t>(std::stoul(digits));
    };
    if (!tensor.defined()) throw InvalidArgumentError(str_cat("PowerSGD state: '", name, "' is not a tensor"));
    if (name == "step") {
      if (tensor.numel() != 1 || tensor.is_floating_point()) {
        throw InvalidArgumentError("PowerSGD state: 'step' is not one integer");
      }
      step = tensor.item<int64_t>();
    } else if (name.rfind("q.", 0) == 0) {
      q[bucket_of(2)] = tensor.detach().clone();
    } else if (name.rfind("error.", 0) == 0) {
      errors[bucket_of(6)] = tensor.detach().clone();
    } else {
      throw InvalidArgumentError(str_cat("PowerSGD state: unknown entry '", name, "'"));
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  step_ = step;
  q_ = std::move(q);
  errors_ = std::move(errors);
}

CommHook powersgd_hook(std::shared_ptr<PowerSgdState> state) {
  if (!state) throw InvalidArgumentError("powersgd_hook: no state");
  auto reduce = &PowerSgdState::reduce;  // private: taken here, where the friendship holds
  return [state, reduce](ProcessGroup& group, const GradBucket& bucket) { return reduce(state, group, bucket); };
}

PendingReduction PowerSgdState::reduce(const std::shared_ptr<PowerSgdState>& self, ProcessGroup& group,
                                       const GradBucket& bucket) {
  PowerSgdState& s = *self;
  const PowerSgdOptions& o = s.options_;
  const int world = group.size();
  const at::Tensor& buffer = bucket.buffer;
  std::unique_lock<std::mutex> lock(s.mutex_);
  if (s.step_ < o.start_step) {
    if (bucket.is_last()) ++s.step_;
    lock.unlock();
    return PendingReduction{group.allreduce_async(buffer, ReduceOp::kAvg), nullptr, nullptr};
  }
  const BucketLayout layout = plan_bucket(bucket, o);
  const size_t index = bucket.index;

  // The input: the gradient plus what earlier steps did not send. With error feedback it is
  // made in the error buffer itself, which after the step keeps input - result: no copy of the
  // bucket per step (each pass over the gradients is time off the step).
  at::Tensor input = buffer;
  bool gradient_to_add = false;  // the input is last step's error: this step's gradient is added below
  if (o.use_error_feedback) {
    auto error = s.errors_.find(index);
    if (error != s.errors_.end()) {
      input =
          fitted(error->second, buffer.numel(), buffer, group.rank(), index, "an error", "the error starts from zero");
    }
    gradient_to_add = input.defined() && input.data_ptr() != buffer.data_ptr();
    if (!gradient_to_add) input = buffer.clone();
    s.errors_[index] = input;
  }

  // Q: last step's (warm start), orthogonalized again, or a draw every rank makes alike.
  at::Tensor q;
  auto kept = s.q_.find(index);
  if (o.warm_start && kept != s.q_.end()) {
    q = fitted(kept->second, layout.q_elements, buffer, group.rank(), index, "a Q", "a new one is drawn");
  }
  if (q.defined()) {
    for (const auto& matrix : layout.matrices) orthogonalize_q(q, matrix, o.orthogonalization_epsilon);
  } else {
    const uint64_t draw = o.warm_start ? 0 : static_cast<uint64_t>(s.step_);
    auto generator = at::detail::createCPUGenerator(o.random_seed + 0x9E3779B97F4A7C15ULL * (index + 1) +
                                                    0xBF58476D1CE4E5B9ULL * draw);
    q = at::randn({layout.q_elements}, generator, at::TensorOptions(at::kFloat)).to(buffer.options());
    for (const auto& matrix : layout.matrices) orthogonalize_q(q, matrix, o.orthogonalization_epsilon);
  }
  if (o.warm_start) s.q_[index] = q;

  s.counting_before_ += buffer.numel();
  s.counting_after_ += layout.uncompressed_elements + layout.p_elements + layout.q_elements;
  if (bucket.is_last()) {
    s.elements_before_ = s.counting_before_;
    s.elements_after_ = s.counting_after_;
    s.counting_before_ = s.counting_after_ = 0;
    ++s.step_;
  }
  lock.unlock();

  // The gradient joins the error: in the first product's pass where the kernels run, else here.
  if (gradient_to_add && !on_cpu_in_float(input)) {
    input.add_(buffer);
    gradient_to_add = false;
  }
  if (gradient_to_add) {
    for (size_t k : layout.uncompressed) {
      const auto& member = bucket.members[k];
      range_op(RangeOp::kAdd, input, member.offset, buffer, member.offset, member.numel);
    }
  }
  // One all-reduce: the uncompressed members, then every P = M Q.
  at::Tensor shared = at::empty({layout.uncompressed_elements + layout.p_elements}, buffer.options());
  int64_t filled = 0;
  for (size_t k : layout.uncompressed) {
    const auto& member = bucket.members[k];
    range_op(RangeOp::kCopy, shared, filled, input, member.offset, member.numel);
    filled += member.numel;
  }
  for (const auto& matrix : layout.matrices) {
    project(input, gradient_to_add ? buffer : at::Tensor(), bucket, matrix, q, shared);
  }
  auto work = group.allreduce_async(shared, ReduceOp::kSum);

  // Then, in two stages, so that DDP starts every bucket's second all-reduce before it waits for
  // any (complete_reductions): the P's are summed; Q = M^T P is summed; the result is P Q^T / W.
  auto start_q = [self, &group, world, bucket_copy = bucket, layout, shared, q, input](PendingReduction& second) {
    PowerSgdState& s = *self;
    const PowerSgdOptions& o = s.options_;
    const GradBucket& b = bucket_copy;
    int64_t read = 0;
    for (size_t k : layout.uncompressed) {
      const auto& member = b.members[k];
      range_op(RangeOp::kCopy, b.buffer, member.offset, shared, read, member.numel, world);
      read += member.numel;
    }
    // The result; with error feedback the error becomes what the input held that the result does not.
    auto decompress = [self, world, b, layout, shared, q, input]() mutable {
      const at::Tensor error = self->options_.use_error_feedback ? input : at::Tensor();
      if (!layout.matrices.empty()) q.div_(world);
      for (const auto& matrix : layout.matrices) reconstruct(b, matrix, q, shared, error);
      if (!error.defined()) return;
      for (size_t k : layout.uncompressed) {
        const auto& member = b.members[k];
        range_op(RangeOp::kSubtract, error, member.offset, b.buffer, member.offset, member.numel);
      }
    };
    if (layout.matrices.empty()) {
      decompress();
      return;
    }
    for (const auto& matrix : layout.matrices) {
      orthogonalize_p(shared, matrix, o.orthogonalization_epsilon);
      project_back(input, b, matrix, q, shared);
    }
    second = PendingReduction{group.allreduce_async(q, ReduceOp::kSum), std::move(decompress), nullptr};
  };
  PendingReduction first;
  first.work = work;
  first.next = std::move(start_q);
  return first;
}

}  // namespace ringtorch
