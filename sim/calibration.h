// Calibration of a simulated platform (DESIGN §10): its per-call costs, from the measured rows at P = 2 alone.
//
// The platform file (sim/platforms/<platform>.xml) carries the links (on one host, the pair bandwidth and one-hop
// latency that `spbench collective --probe` measured at P = 2). The per-call costs are what the wire does not
// explain, found by simulating P = 2 itself: `spbench sim-calibrate` reads the measured P = 2 rows and the rows the
// simulated build gave at P = 2 with the current constants, and moves each constant by the median over the state
// sizes of (measured - simulated), per call or per block:
//   nccl_p2p_call_s        the chain pattern (one NCCL send and receive of the whole state)
//   nccl_group_call_s      the ring pattern (each step a group of one send and one receive)
//   nccl_allgather_call_s  the all-gather pattern
//   nccl_alltoall_call_s   the all-to-all pattern
//   nccl_allreduce_call_s  no row measures it alone: the all-gather's, said as such
//   device_call_s          the device All-Scan (device-ll16): its one-block state (64 KiB), per call
//   device_block_s         the same with 32 blocks of 16384 elements or more, per block
//   stage_offset_s         dp at the operator level, per stage call: the launch gaps between kernels, or (negative)
//                          the recorder's events, which lengthen every stage they bracket
// scripts/sim.sh runs it from all-zero constants, three times (each pass takes what the last one's pipelining hid).
#pragma once

#include <string>

namespace spb {

struct CalibrationOptions {
  std::string measured_collective, measured_operator;    // measured rows (those at P = 2 on one node are read)
  std::string simulated_collective, simulated_operator;  // the simulated build's rows at P = 2, from `calibration`
  std::string calibration;                               // the constants those rows were simulated with
  std::string stages;                                    // the stage table (dp's stage calls per iteration)
  std::string out;                                       // the .calib file to write
};

// Fits the constants and writes `out`; prints what it fitted. UsageError where a source lacks the rows it needs.
int run_sim_calibrate(const CalibrationOptions& o);

}  // namespace spb
