// The simulated backend (`--backend sim`, DESIGN §10): spbench's own levels and methods, run by SimGrid's SMPI on a
// platform file, with a SimDevice (time, no data), the GPU's stage times (SimKernels over the stage table) and a
// communicator that runs every operation as MPI in the simulation, each call first paying the per-call cost of the
// transport it stands for (calibrated at P = 2: sim/calibration.h). What each transport is on the wire:
//   nccl p2p        one MPI message per send (NCCL's send/recv kernels); a group one call for all its messages
//   nccl all-gather MPI_Allgather with SMPI's ring algorithm (smpirun --cfg=smpi/allgather:ring), as NCCL's ring
//   nccl all-to-all MPI_Alltoall, pairwise (smpi/alltoall:pair): NCCL's grouped sends and receives
//   nccl all-reduce MPI_Allreduce as a ring reduce-scatter and all-gather (smpi/allreduce:lr)
//   device          zeco's device All-Scan: the same chain of blocks (the host All-Scan's code), each block one
//                   peer write of its bytes plus the per-block handshake (flag, ack); the fold runs inside the kernel,
//                   so the stage table's state_fold is not charged again
#pragma once

#include <memory>
#include <string>

#include "sim/sim_device.h"
#include "sim/stage_table.h"
#include "sp/runtime.h"

namespace spb {

// Seconds each communication call costs before its bytes move (the intercepts of the P = 2 fits).
struct SimTransport {
  double nccl_p2p_s = 0, nccl_group_s = 0, nccl_allgather_s = 0, nccl_alltoall_s = 0, nccl_allreduce_s = 0;
  double device_call_s = 0, device_block_s = 0;  // the device All-Scan: its start, once a call; each block
};

// A platform's calibration file: `key = value` lines (# comments say where each value came from).
struct SimCalibration {
  std::string path;
  SimGpu gpu;
  SimTransport transport;
};
SimCalibration read_sim_calibration(const std::string& path);

// What --backend sim runs on.
struct SimSetup {
  std::string stage_table;  // --sim-stages: the GPU's stage rows (results/<kind>_stages.csv)
  std::string calibration;  // --sim-calibration: the platform's constants (sim/platforms/<platform>.calib)
  std::string platform;     // --sim-platform: the name rows carry in `platform` (the calibration's by default)
  bool device_transport = false;  // zeco's All-Scan is a device protocol (its runs set sim_use_device_transport)
};

std::unique_ptr<GlaKernels> make_sim_kernels(SimDevice& dev, StageTable table);
std::unique_ptr<Communicator> make_sim_communicator(Bootstrap& boot, SimDevice& dev, const SimTransport& t);
// Point-to-point operations of `rt` (a --backend sim runtime) stand for the device All-Scan's peer writes (`on`) or
// NCCL's sends, from now on: the levels set it for each method or pattern they run.
void sim_use_device_transport(Runtime& rt, bool on);
// The SMPI clock and shared memory (sim/sim_smpi.cpp); a UsageError in a build without SMPI.
std::unique_ptr<SimClock> make_smpi_clock();

// The runtime of --backend sim (the stage table and the calibration read, every rank agreeing on their errors).
std::unique_ptr<Runtime> make_sim_runtime(Bootstrap& boot, const SimSetup& setup, int ranks_per_node = 0);
// Nodes of `ranks_per_node` consecutive ranks (0: the whole world one node): the platform's hosts are the GPUs, so
// the launch says nothing of nodes and the flag alone does.
Topology sim_topology(const Bootstrap& boot, int ranks_per_node);
// The platform name a sim row records.
std::string sim_platform_name(const SimSetup& setup);

}  // namespace spb
