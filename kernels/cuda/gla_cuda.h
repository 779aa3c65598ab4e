// The CUDA GLA stages: bf16 activations, fp32 cumulative gates, states and state gradients.
#pragma once

#include <memory>

#include "kernels/gla_kernels.h"

namespace spb {
std::unique_ptr<GlaKernels> make_cuda_kernels();
}
