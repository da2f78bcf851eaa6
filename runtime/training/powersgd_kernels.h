// PowerSGD's products on row-major float matrices in CPU memory (powersgd.cc), each one pass over
// the gradient matrix, where at::mm handles a product with a few columns poorly (measured in
// docs/benchmarks.md, "Gradient compression on slow links"); error feedback's addition joins the
// first product's pass and the error update the decompression's. They are written for the
// build's baseline vector registers (SSE2, NEON: four floats): P = M Q takes 4 rows at a time in
// explicit vectors, sharing each load of Q; Q = M^T P adds 4 rows of M at a time into Q^T; P Q^T
// goes row by row; the last two are loops over contiguous columns that the compiler vectorizes.
// The order of every sum is fixed (below) and does not depend on that blocking, so every rank
// computes the same bits from the same inputs.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstdint>

namespace ringtorch::powersgd_kernels {

// m += add (when `add` is not null; row by row, in the same pass), then
// p (rows x r) = m (rows x cols) . q (cols x r). For r 1, 2, 4 and 8 each entry of p is summed
// over four partial sums, lane j mod 4 in order of j (the columns past the last multiple of 4
// joining lane 0), added as (lane 0 + lane 1) + (lane 2 + lane 3); for other r, one sum in
// order of j.
void add_and_multiply(float* m, const float* add, const float* q, float* p, int64_t rows, int64_t cols, int64_t r);

// q (cols x r) = m^T . p, with m rows x cols and p rows x r; each entry summed from 0 in order
// of the rows.
void multiply_transposed(const float* m, const float* p, float* q, int64_t rows, int64_t cols, int64_t r);

// out (rows x cols) = p (rows x r) . q^T (q: cols x r), each entry summed from 0 in order of
// r's columns; and, when `error` is not null, error -= out in the same pass.
void reconstruct(const float* p, const float* q, float* out, float* error, int64_t rows, int64_t cols, int64_t r);

}  // namespace ringtorch::powersgd_kernels
