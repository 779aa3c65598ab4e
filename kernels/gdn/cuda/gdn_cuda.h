// The CUDA Gated DeltaNet stages (kernels/gdn/gdn_kernels.h): bf16 q, k, v, o and their gradients, fp32 gates, betas,
// states and transitions, fp32 arithmetic (3xTF32 tensor-core products; kernels/gdn/cuda/NOTES.md). dk and dv:
// multiples of 16 from 16 to 128, q, k and do 16-byte aligned (else UsageError); any B, T, H.
#pragma once

#include <memory>

#include "kernels/gdn/gdn_kernels.h"

namespace spb {
std::unique_ptr<GdnKernels> make_cuda_gdn_kernels();
}
