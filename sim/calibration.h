// Calibration of a simulated platform (DESIGN §10): its transports' costs, from the measured rows at P = 2 alone.
//
// The platform file (sim/platforms/<platform>.xml) carries the links (on one host, the pair bandwidth and one-hop
// latency that `spbench collective --probe` measured at P = 2). What the wire does not explain is each transport's
// cost per call and per byte (SimCost, sim/sim_runtime.h), found by simulating P = 2 itself: `spbench sim-calibrate`
// reads the measured P = 2 rows and the rows the simulated build gave at P = 2 with the current constants, and fits
// each constant to what they left (measured - simulated):
//   nccl_p2p_*         the chain pattern (one NCCL send and receive of the whole state)
//   nccl_group_*       the ring pattern (each step a group of one send and one receive)
//   nccl_allgather_*   the all-gather pattern
//   nccl_alltoall_*    the all-to-all pattern (its bytes: the piece per peer)
//   nccl_allreduce_*   no row measures it alone: the all-gather's, said as such
//   device_call_s      the device All-Scan (device-ll16): its one-block state (64 KiB), per call
//   device_block_s     the same with 32 blocks of 16384 elements or more, per block
//   stage_offset_s     dp at the operator level, per stage call: the launch gaps between kernels, or (negative)
//                      the recorder's events, which lengthen every stage they bracket
// An NCCL transport's cost is two lines over the state sizes, each a least-squares fit of the cost each row asks for
// (the cost the simulation charged plus what the row left), its residuals relative to the measured time (the
// hold-out's measure), both constants >= 0: one where latency sets the time (the small sizes, NCCL's LL protocol for
// a collective), one where bandwidth does. They split at the size that fits best with 3 sizes or more a side, chosen
// in the first pass and kept after (sim/NOTES.md, "Calibration", says why two). The device and stage constants move
// by the median over the sizes of what the rows left, per call, block or stage. scripts/sim.sh runs it from all-zero
// constants, three times (each pass takes what the last one's pipelining hid).
#pragma once

#include <string>
#include <vector>

#include "sim/sim_runtime.h"

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

// One size of a transport's fit: the call's bytes, the seconds its cost should be (what the simulation charged plus
// what the row left, measured - simulated), and the measured seconds the residual is relative to.
struct CostPoint {
  double bytes = 0, target_s = 0, measured_s = 0;
};
// The line call_s + byte_s * bytes over `points` (two or more sizes) by least squares of the residuals relative to
// measured_s, call_s and byte_s >= 0 (where one comes out negative it is held at 0 and the other fitted alone).
SimCost fit_cost_line(const std::vector<CostPoint>& points);
// Two lines: below `split_bytes` and from it on. split_bytes 0: the split among the points' sizes that fits best with
// at least 3 sizes a side (a UsageError with fewer than 6 sizes).
SimCost fit_cost_two_lines(const std::vector<CostPoint>& points, double split_bytes = 0);
// The residuals of `cost` at `points`, relative to measured_s: their root mean square and the largest by size.
struct CostResiduals {
  double rms = 0, worst = 0, worst_bytes = 0;
};
CostResiduals cost_residuals(const SimCost& cost, const std::vector<CostPoint>& points);

}  // namespace spb
