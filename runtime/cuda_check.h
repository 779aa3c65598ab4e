// One-line checks for CUDA, cuBLAS and NCCL calls: a failure names the call, the file, the line and the rank.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "runtime/error.h"

#define SPB_CUDA(call)                                                                                   \
  do {                                                                                                   \
    cudaError_t e_ = (call);                                                                             \
    if (e_ != cudaSuccess) ::spb::fail(__FILE__, __LINE__, std::string(#call) + ": " + cudaGetErrorString(e_)); \
  } while (0)

// After a kernel launch: launch errors now, asynchronous faults at the next synchronising call.
#define SPB_CUDA_LAUNCH() SPB_CUDA(cudaGetLastError())
