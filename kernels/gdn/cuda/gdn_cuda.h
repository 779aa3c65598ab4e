// The CUDA Gated DeltaNet stages (kernels/gdn/gdn_kernels.h): bf16 q, k, v, o and their gradients, fp32 gates, betas,
// states and transitions, fp32 arithmetic (kernels/gdn/cuda/NOTES.md). dk and dv: multiples of 16 up to 128 (else
// UsageError); any B, T, H.
#pragma once

#include <memory>

#include "kernels/gdn/gdn_kernels.h"

namespace spb {
std::unique_ptr<GdnKernels> make_cuda_gdn_kernels();
}
