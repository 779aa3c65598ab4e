// The CUDA GLA stages: bf16 activations and chunk states (hs, dhs: chunk_state_type()), fp32 cumulative gates and
// the other states and state gradients.
#pragma once

#include <memory>

#include "kernels/gla/gla_kernels.h"

namespace spb {
std::unique_ptr<GlaKernels> make_cuda_kernels();

// One bf16 rounding to nearest is off by at most 2^-8 of the value: the bar (relative RMS) the GPU tests and the
// emulator hold a chunk state to against the fp32 value it was rounded from (or computed in fp32 elsewhere), and two
// chunk states rounded from fp32 values that agree up to the order of their sums. The fp32 states keep their own bars.
constexpr double kOneBf16Rounding = 1.0 / 256;
}
