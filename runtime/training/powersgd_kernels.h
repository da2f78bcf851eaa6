// PowerSGD's products on row-major float matrices in CPU memory (powersgd.cc), each one pass over
// the gradient matrix, where at::mm handles a product with a few columns poorly (measured in
// docs/benchmarks.md, "Gradient compression on slow links"); error feedback's addition joins the
// first product's pass and the error update the decompression's. They work four floats at a time
// (vector registers of the build's baseline: SSE2, NEON) over a few rows at once, so that the
// loads of the small factor serve several rows and several sums are in flight; the order of every
// sum is fixed (stated at each kernel) and does not depend on that blocking, so every rank
// computes the same bits from the same inputs.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstdint>

namespace ringtorch::powersgd_kernels {

// m += add (when `add` is not null; row by row, in the same pass), then
// p (rows x r) = m (rows x cols) . q (cols x r)
void add_and_multiply(float* m, const float* add, const float* q, float* p, int64_t rows, int64_t cols, int64_t r);

// q (cols x r) = m^T . p, with m rows x cols and p rows x r
void multiply_transposed(const float* m, const float* p, float* q, int64_t rows, int64_t cols, int64_t r);

// out (rows x cols) = p (rows x r) . q^T (q: cols x r); and, when `error` is not null,
// error -= out in the same pass.
void reconstruct(const float* p, const float* q, float* out, float* error, int64_t rows, int64_t cols, int64_t r);

}  // namespace ringtorch::powersgd_kernels
