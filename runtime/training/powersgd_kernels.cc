#include "runtime/training/powersgd_kernels.h"

#include <algorithm>
#include <vector>

namespace ringtorch::powersgd_kernels {
namespace {

// Row i of p: r dot products of m's row with q's columns, over four interleaved partial sums
// (j mod 4) so that the additions do not wait on each other.
template <int R>
void multiply_fixed(float* m, const float* add, const float* q, float* p, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    float* row = m + i * cols;
    if (add) {
      const float* add_row = add + i * cols;
      for (int64_t j = 0; j < cols; ++j) row[j] += add_row[j];
    }
    float partial[4][R] = {};
    int64_t j = 0;
    for (; j + 4 <= cols; j += 4) {
      for (int lane = 0; lane < 4; ++lane) {
        const float value = row[j + lane];
        const float* q_row = q + (j + lane) * R;
        for (int c = 0; c < R; ++c) partial[lane][c] += value * q_row[c];
      }
    }
    for (; j < cols; ++j) {
      for (int c = 0; c < R; ++c) partial[0][c] += row[j] * q[j * R + c];
    }
    for (int c = 0; c < R; ++c) p[i * R + c] = (partial[0][c] + partial[1][c]) + (partial[2][c] + partial[3][c]);
  }
}

void multiply_any(float* m, const float* add, const float* q, float* p, int64_t rows, int64_t cols, int64_t r) {
  for (int64_t i = 0; i < rows; ++i) {
    if (add) {
      for (int64_t j = 0; j < cols; ++j) m[i * cols + j] += add[i * cols + j];
    }
    for (int64_t c = 0; c < r; ++c) {
      float sum = 0;
      for (int64_t j = 0; j < cols; ++j) sum += m[i * cols + j] * q[j * r + c];
      p[i * r + c] = sum;
    }
  }
}

}  // namespace

void add_and_multiply(float* m, const float* add, const float* q, float* p, int64_t rows, int64_t cols, int64_t r) {
  switch (r) {
    case 1:
      return multiply_fixed<1>(m, add, q, p, rows, cols);
    case 2:
      return multiply_fixed<2>(m, add, q, p, rows, cols);
    case 4:
      return multiply_fixed<4>(m, add, q, p, rows, cols);
    case 8:
      return multiply_fixed<8>(m, add, q, p, rows, cols);
    default:
      return multiply_any(m, add, q, p, rows, cols, r);
  }
}

void multiply_transposed(const float* m, const float* p, float* q, int64_t rows, int64_t cols, int64_t r) {
  // Into q transposed (r x cols, in cache while m streams past once): each row of m, scaled by
  // its r entries of p, added to the r rows; contiguous, so the additions vectorize.
  std::vector<float> qt(static_cast<size_t>(cols * r), 0.0f);
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = m + i * cols;
    for (int64_t c = 0; c < r; ++c) {
      const float scale = p[i * r + c];
      float* qt_row = qt.data() + c * cols;
      for (int64_t j = 0; j < cols; ++j) qt_row[j] += scale * row[j];
    }
  }
  for (int64_t j = 0; j < cols; ++j) {
    for (int64_t c = 0; c < r; ++c) q[j * r + c] = qt[c * cols + j];
  }
}

void reconstruct(const float* p, const float* q, float* out, float* error, int64_t rows, int64_t cols, int64_t r) {
  // q transposed (r x cols), so that each output row is r scaled rows added up, contiguous.
  std::vector<float> qt(static_cast<size_t>(cols * r));
  for (int64_t j = 0; j < cols; ++j) {
    for (int64_t c = 0; c < r; ++c) qt[c * cols + j] = q[j * r + c];
  }
  for (int64_t i = 0; i < rows; ++i) {
    float* out_row = out + i * cols;
    const float* p_row = p + i * r;
    std::fill(out_row, out_row + cols, 0.0f);
    for (int64_t c = 0; c < r; ++c) {
      const float scale = p_row[c];
      const float* qt_row = qt.data() + c * cols;
      for (int64_t j = 0; j < cols; ++j) out_row[j] += scale * qt_row[j];
    }
    if (error) {
      float* error_row = error + i * cols;
      for (int64_t j = 0; j < cols; ++j) error_row[j] -= out_row[j];
    }
  }
}

}  // namespace ringtorch::powersgd_kernels
