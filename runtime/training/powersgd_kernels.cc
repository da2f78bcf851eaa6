#include "runtime/training/powersgd_kernels.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace ringtorch::powersgd_kernels {
namespace {

// Four floats, in one SSE2 or NEON register (GCC's and Clang's vector extensions: the build's
// baseline instruction set, no run-time dispatch). Arithmetic on it is lane by lane, in the
// order written, never reassociated. The x86-64 baseline has no fused multiply-add; where a
// target has one (aarch64), GCC may contract a product and a sum into one, here as in plain
// loops, alike in every rank's build of this code.
typedef float Float4 __attribute__((vector_size(16)));
Float4 load4(const float* from) {
  Float4 v;
  std::memcpy(&v, from, sizeof v);
  return v;
}
void store4(float* to, Float4 v) { std::memcpy(to, &v, sizeof v); }

// q (cols x r) as r rows of cols: one contiguous row per column of q.
std::vector<float> transposed(const float* q, int64_t cols, int64_t r) {
  std::vector<float> qt(static_cast<size_t>(cols * r));
  for (int64_t j = 0; j < cols; ++j) {
    for (int64_t c = 0; c < r; ++c) qt[c * cols + j] = q[j * r + c];
  }
  return qt;
}

// Rows [first, first + N) of p = m . q, after m += add in the same pass. Each of a row's r sums
// runs over four interleaved partial sums (lane j mod 4, in order of j; the columns past the
// last multiple of 4 join lane 0), added up as (lane 0 + lane 1) + (lane 2 + lane 3): the same
// order whatever N. N rows at once share each load of qt and keep N x R sums in flight.
template <int R, int N>
void rows_times_q(float* m, const float* add, const float* qt, const float* q, float* p, int64_t first, int64_t cols) {
  const int64_t blocked = cols / 4 * 4;
  Float4 sums[N][R];
  for (int n = 0; n < N; ++n) {
    for (int c = 0; c < R; ++c) sums[n][c] = Float4{0, 0, 0, 0};
  }
  for (int64_t j = 0; j < blocked; j += 4) {
    Float4 values[N];
    for (int n = 0; n < N; ++n) {
      float* at = m + (first + n) * cols + j;
      values[n] = load4(at);
      if (add) {
        values[n] += load4(add + (first + n) * cols + j);
        store4(at, values[n]);
      }
    }
    for (int c = 0; c < R; ++c) {
      const Float4 column = load4(qt + c * cols + j);
      for (int n = 0; n < N; ++n) sums[n][c] += values[n] * column;
    }
  }
  for (int n = 0; n < N; ++n) {
    float* row = m + (first + n) * cols;
    float lane0[R];
    for (int c = 0; c < R; ++c) lane0[c] = sums[n][c][0];
    for (int64_t j = blocked; j < cols; ++j) {
      if (add) row[j] += add[(first + n) * cols + j];
      for (int c = 0; c < R; ++c) lane0[c] += row[j] * q[j * R + c];
    }
    for (int c = 0; c < R; ++c) {
      p[(first + n) * R + c] = (lane0[c] + sums[n][c][1]) + (sums[n][c][2] + sums[n][c][3]);
    }
  }
}

template <int R>
void multiply_fixed(float* m, const float* add, const float* q, float* p, int64_t rows, int64_t cols) {
  // R x 4 sums in flight: at R = 4 more than the 16 vector registers hold with their operands (the
  // compiler keeps some on the stack), still faster than 2 rows at once (measured); R = 8 one row.
  constexpr int kRowsAtOnce = R >= 8 ? 1 : 4;
  const std::vector<float> qt = transposed(q, cols, R);
  int64_t i = 0;
  for (; i + kRowsAtOnce <= rows; i += kRowsAtOnce) rows_times_q<R, kRowsAtOnce>(m, add, qt.data(), q, p, i, cols);
  for (; i < rows; ++i) rows_times_q<R, 1>(m, add, qt.data(), q, p, i, cols);
}

// Any r: one plain sum per entry of p.
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

// out's rows = p's rows . qt, each entry summed over c in order from 0; error -= out alongside.
template <int R>
void reconstruct_fixed(const float* p, const float* qt, float* out, float* error, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    float scale[R];
    for (int c = 0; c < R; ++c) scale[c] = p[i * R + c];
    float* out_row = out + i * cols;
    for (int64_t j = 0; j < cols; ++j) {
      float value = 0.0f;
      for (int c = 0; c < R; ++c) value += scale[c] * qt[c * cols + j];
      out_row[j] = value;
    }
    if (error) {  // the row just written is still in cache
      float* error_row = error + i * cols;
      for (int64_t j = 0; j < cols; ++j) error_row[j] -= out_row[j];
    }
  }
}

// The same sums for any r: each row r scaled rows of qt added up in turn.
void reconstruct_any(const float* p, const float* qt, float* out, float* error, int64_t rows, int64_t cols, int64_t r) {
  for (int64_t i = 0; i < rows; ++i) {
    float* out_row = out + i * cols;
    std::fill(out_row, out_row + cols, 0.0f);
    for (int64_t c = 0; c < r; ++c) {
      const float scale = p[i * r + c];
      const float* qt_row = qt + c * cols;
      for (int64_t j = 0; j < cols; ++j) out_row[j] += scale * qt_row[j];
    }
    if (error) {
      float* error_row = error + i * cols;
      for (int64_t j = 0; j < cols; ++j) error_row[j] -= out_row[j];
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
  // its r entries of p, added to the r rows in order of the rows of m. Four rows of m at a time
  // load and store each of qt's entries once for all four; the additions stay in that order.
  std::vector<float> qt(static_cast<size_t>(cols * r), 0.0f);
  int64_t i = 0;
  for (; i + 4 <= rows; i += 4) {
    const float* m0 = m + i * cols;
    const float *m1 = m0 + cols, *m2 = m1 + cols, *m3 = m2 + cols;
    for (int64_t c = 0; c < r; ++c) {
      const float s0 = p[i * r + c], s1 = p[(i + 1) * r + c], s2 = p[(i + 2) * r + c], s3 = p[(i + 3) * r + c];
      float* qt_row = qt.data() + c * cols;
      for (int64_t j = 0; j < cols; ++j) {
        qt_row[j] = (((qt_row[j] + s0 * m0[j]) + s1 * m1[j]) + s2 * m2[j]) + s3 * m3[j];
      }
    }
  }
  for (; i < rows; ++i) {
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
  const std::vector<float> qt = transposed(q, cols, r);
  switch (r) {
    case 1:
      return reconstruct_fixed<1>(p, qt.data(), out, error, rows, cols);
    case 2:
      return reconstruct_fixed<2>(p, qt.data(), out, error, rows, cols);
    case 4:
      return reconstruct_fixed<4>(p, qt.data(), out, error, rows, cols);
    case 8:
      return reconstruct_fixed<8>(p, qt.data(), out, error, rows, cols);
    default:
      return reconstruct_any(p, qt.data(), out, error, rows, cols, r);
  }
}

}  // namespace ringtorch::powersgd_kernels
