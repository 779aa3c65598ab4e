// Where a number came from: git sha (and dirty flag), GPU, driver, CUDA, NCCL and MPI versions, host, date.
#pragma once

#include "runtime/csv.h"

namespace spb {
class Device;
// The commit the rows of this run carry: $SPB_GIT_SHA where set, else the sha this binary was built from.
std::string git_sha();
// This host's name (gethostname).
std::string host_name();
// Fills the provenance columns of `row` (gpu, git_sha, date, host, driver, cuda, nccl, mpi).
void add_provenance(ResultRow& row, const Device& dev);
}  // namespace spb
