// The runtime an SP method runs on: where tensors live (Device), the GLA stages (GlaKernels) and the data plane
// (Communicator), plus the bootstrap for host-side agreements. `cpu`: host memory, fp32 stages, MPI.
// `gpu`: one GPU per rank (chosen by the local rank), bf16/fp32 CUDA stages, NCCL.
#pragma once

#include <memory>
#include <string>

#include "harness/bootstrap.h"
#include "harness/communicator.h"
#include "harness/device.h"
#include "kernels/gla_kernels.h"

namespace spb {

class Timeline;

struct Runtime {
  Bootstrap& boot;
  std::string backend;  // "cpu" or "gpu"
  std::unique_ptr<Device> dev;
  std::unique_ptr<GlaKernels> kern;
  std::unique_ptr<Communicator> comm;
  Timeline* timeline = nullptr;  // set while one iteration's spans are recorded (harness/timeline.h)

  int rank() const { return boot.rank(); }
  int world() const { return boot.size(); }
};

// "auto": "gpu" where this build and node have a GPU, else "cpu"; any other name is returned as it is.
std::string resolve_backend(const std::string& backend);

// Throws UsageError for a backend that does not exist or cannot run here (e.g. `gpu` with no GPU).
std::unique_ptr<Runtime> make_runtime(Bootstrap& boot, const std::string& backend);

}  // namespace spb
