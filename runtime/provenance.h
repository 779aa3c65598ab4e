// Where a number came from: git sha (and dirty flag), GPU, driver, CUDA, NCCL and MPI versions, host, date.
#pragma once

#include "runtime/csv.h"

namespace spb {
class Device;
// The commit the rows of this run carry: $SPB_GIT_SHA where set, else the sha this binary was built from.
std::string git_sha();
// This host's name: the kernel's, gethostname's, $HOSTNAME or $SLURMD_NODENAME, the first that is not a generic name
// ("vm", "localhost"); where all are generic, $SPB_HOST if set, else the generic name.
std::string host_name();
// The NVIDIA driver's version ("580.65.06") from /proc/driver/nvidia/version, else NVML (dlopen'ed); "" if unknown.
std::string driver_version();
// Fills the provenance columns of `row` (gpu, git_sha, date, host, driver, cuda, nccl, mpi): `driver` the driver's
// version, `cuda` the CUDA runtime's.
void add_provenance(ResultRow& row, const Device& dev);
}  // namespace spb
