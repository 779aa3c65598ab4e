// The simulated backend (`--backend sim`, DESIGN §10): spbench's own levels and methods, run by SimGrid's SMPI on a
// platform file, with a SimDevice (time, no data), the GPU's stage times (SimKernels over the stage table, and
// SimGdnKernels over the same table for Gated DeltaNet's stages) and a communicator that runs every operation as MPI
// point-to-point messages in the simulation, each call first paying its transport's cost, a per-call and a per-byte
// part (calibrated at P = 2: sim/calibration.h). What each transport is
// on the wire (sim/sim_comm.cpp; no SMPI collective carries a call's bytes):
//   nccl p2p        one MPI message per send (NCCL's send/recv kernels); a group one call for all its messages. Across
//                   nodes a GPU's messages share its own NIC (the DGX platform's rails)
//   nccl all-gather NCCL's ring: P - 1 steps, each passing one piece to the next rank
//   nccl all-reduce NCCL's ring, a reduce-scatter and an all-gather of P - 1 steps each (a reduce-scatter alone, the
//                   first P - 1), summing nothing
//                   every ring on 8 channels, each its own ring as NCCL lays them on nodes (entering a node at its GPU
//                   c, leaving from the GPU before it), so a node's crossings use its 8 GPUs' NICs; the steps' bytes in
//                   one pass of the 8 channels' flows, every other step's latency paid
//   nccl all-to-all NCCL's grouped sends and receives, all at once: on one node a piece straight to each peer; across
//                   nodes as NCCL's PXN moves them (over NVLink to the GPU on the peer's rail, which sends its node's
//                   pieces for that peer over its own NIC)
//   device          zeco's device All-Scan: the same chain of blocks (the host All-Scan's code), each block one
//                   peer write of its bytes plus the per-block handshake (flag, ack); the fold runs inside the kernel,
//                   so the stage table's state_fold is not charged again
// A collective's message above 1 GiB is several (SMPI counts in int); a send or receive above 2 GiB is a UsageError.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/sim_device.h"
#include "sim/stage_table.h"
#include "sp/runtime.h"

namespace spb {

// What one call of a transport costs before its bytes move: per_call + per_byte * bytes, the bytes being the call's
// (a send's or a receive's message, the more of what a rank sends and receives in a group, an all-gather's own
// piece, an all-to-all's piece per peer, an all-reduce's piece: a P-th of its buffer, what each step of its ring
// passes). Where the transport's protocol changes with the size (NCCL's collectives: LL, LL128, Simple), a second
// line holds from `split_bytes` on.
struct SimCost {
  double call_s = 0, byte_s = 0;              // the line below split_bytes (everywhere where split_bytes is 0)
  double split_bytes = 0;                     // 0: one line
  double above_call_s = 0, above_byte_s = 0;  // the line from split_bytes on
  double seconds(double bytes) const {
    return split_bytes > 0 && bytes >= split_bytes ? above_call_s + above_byte_s * bytes : call_s + byte_s * bytes;
  }
};

struct SimTransport {
  SimCost nccl_p2p, nccl_group, nccl_allgather, nccl_alltoall, nccl_allreduce;
  double device_call_s = 0, device_block_s = 0;  // the device All-Scan: its start, once a call; each block
};

// The calibration file's name of each NCCL transport's cost: keys <name>_call_s and <name>_byte_s, and for a second
// line <name>_split_bytes, <name>_above_call_s and <name>_above_byte_s (all three or none).
struct SimCostKey {
  const char* name;
  SimCost SimTransport::*cost;
};
const std::vector<SimCostKey>& sim_cost_keys();

// A platform's calibration file: `key = value` lines (# comments say where each value came from). A UsageError
// naming the file and the line or key where it is malformed: a line that is not `key = value`, a key given twice or
// unknown, a value that is not a number (or is negative, but for stage_offset_s), a required key missing, a second
// line given in part.
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
};

std::unique_ptr<GlaKernels> make_sim_kernels(SimDevice& dev, StageTable table);
// Gated DeltaNet's stages from the same table (sim/sim_gdn_kernels.cpp: its rows of the gdn_ stages). act: the
// activations' type, bf16 as on the GPU the table was recorded on (fp32 where a test replays its CPU ranks' table).
std::unique_ptr<GdnKernels> make_sim_gdn_kernels(SimDevice& dev, StageTable table, DType act = DType::bf16);
// Nodes of `ranks_per_node` consecutive ranks (0: one node), where NCCL's rings cross between nodes (sim_comm.cpp).
std::unique_ptr<Communicator> make_sim_communicator(Bootstrap& boot, SimDevice& dev, const SimTransport& t,
                                                   int ranks_per_node = 0);
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
