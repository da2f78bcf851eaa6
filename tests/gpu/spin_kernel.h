// A kernel that keeps one stream busy for a while, for tests that check that an operation on
// another stream does not wait for it (no device-wide synchronisation). Compiled by nvcc.
#pragma once

namespace ringtorch::testing {

// Queues a single-thread kernel on `stream` (a cudaStream_t) that spins for about `milliseconds`
// of wall-clock time (the GPU's global timer). Returns false when the launch failed.
bool launch_spin_kernel(void* stream, int milliseconds);

}  // namespace ringtorch::testing
