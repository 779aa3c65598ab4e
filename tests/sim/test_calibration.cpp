// The calibration's fits (sim/calibration.h): a transport's cost as one line or two over the sizes, its residuals
// relative to the measured times, and `spbench sim-calibrate` end to end on rows whose costs are known.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/csv.h"
#include "runtime/error.h"
#include "sim/calibration.h"

namespace spb {
namespace {

// Points whose target is the line `c` (measured: twice the target, so that the weights differ by size).
std::vector<CostPoint> points_on(const SimCost& c, const std::vector<double>& sizes) {
  std::vector<CostPoint> p;
  for (double b : sizes) p.push_back({b, c.seconds(b), 2 * c.seconds(b)});
  return p;
}
const std::vector<double> kSizes = {65536, 131072, 262144, 524288, 1048576, 2097152, 4194304, 8388608};

TEST(CalibrationFit, ALineThroughItsOwnPointsComesBack) {
  SimCost truth;
  truth.call_s = 12e-6, truth.byte_s = 2e-12;
  const SimCost c = fit_cost_line(points_on(truth, kSizes));
  EXPECT_NEAR(c.call_s, 12e-6, 1e-12);
  EXPECT_NEAR(c.byte_s, 2e-12, 1e-18);
  EXPECT_EQ(c.split_bytes, 0);
  EXPECT_NEAR(cost_residuals(c, points_on(truth, kSizes)).rms, 0, 1e-9);
}

TEST(CalibrationFit, TheResidualsAreRelativeToTheMeasuredTimes) {
  SimCost flat;
  flat.call_s = 10e-6;
  // 1 us off at a 10 us row is 10%; at a 100 us row, nothing off.
  const CostResiduals r = cost_residuals(flat, {{1e5, 11e-6, 10e-6}, {2e5, 10e-6, 100e-6}});
  EXPECT_NEAR(r.rms, std::sqrt(0.01 / 2), 1e-12);
  EXPECT_NEAR(r.worst, -0.1, 1e-12);
  EXPECT_EQ(r.worst_bytes, 1e5);
  // The same seconds off at a short row and a long one: the fit keeps closer to the short one.
  std::vector<CostPoint> p = {{1e5, 11e-6, 10e-6}, {2e5, 11e-6, 100e-6}, {3e5, 13e-6, 100e-6}};
  const SimCost c = fit_cost_line(p);
  EXPECT_LT(std::fabs(c.seconds(1e5) - p[0].target_s), std::fabs(c.seconds(2e5) - p[1].target_s));
  EXPECT_LT(std::fabs(c.seconds(1e5) - p[0].target_s), std::fabs(c.seconds(3e5) - p[2].target_s));
}

TEST(CalibrationFit, NeitherConstantGoesBelowZero) {
  // Falling with the size: no negative cost per byte, the flat line (the weighted mean) instead.
  std::vector<CostPoint> falling = {{1e5, 20e-6, 20e-6}, {2e5, 18e-6, 20e-6}, {4e5, 16e-6, 20e-6}};
  SimCost c = fit_cost_line(falling);
  EXPECT_EQ(c.byte_s, 0);
  EXPECT_NEAR(c.call_s, 18e-6, 1e-12);
  // A line that would cross zero above the smallest size: no negative cost per call, a line through zero instead.
  std::vector<CostPoint> steep = {{1e5, 1e-6, 1e-5}, {2e5, 4e-6, 1e-5}, {3e5, 7e-6, 1e-5}};
  c = fit_cost_line(steep);
  EXPECT_EQ(c.call_s, 0);
  EXPECT_GT(c.byte_s, 0);
  EXPECT_THROW(fit_cost_line({{1e5, 1e-6, 1e-5}}), UsageError);  // one size is no line
}

TEST(CalibrationFit, TwoLinesSplitWhereTheRowsJump) {
  // Flat below 1 MiB, then a line from a higher intercept: the split falls at 1 MiB and both lines come back.
  std::vector<CostPoint> p;
  for (double b : kSizes) {
    const double t = b < 1048576 ? 10e-6 : 20e-6 + 1.5e-12 * b;
    p.push_back({b, t, t + 5e-6});
  }
  const SimCost c = fit_cost_two_lines(p);
  EXPECT_EQ(c.split_bytes, 1048576);
  EXPECT_NEAR(c.call_s, 10e-6, 1e-12);
  EXPECT_NEAR(c.byte_s, 0, 1e-18);
  EXPECT_NEAR(c.above_call_s, 20e-6, 1e-12);
  EXPECT_NEAR(c.above_byte_s, 1.5e-12, 1e-18);
  EXPECT_NEAR(cost_residuals(c, p).rms, 0, 1e-9);
  // A split given (a later pass) is kept, wherever the rows would put it now.
  EXPECT_EQ(fit_cost_two_lines(p, 4194304).split_bytes, 4194304);
  // Fewer than three sizes a side cannot choose a split.
  EXPECT_THROW(fit_cost_two_lines({p.begin(), p.begin() + 5}), UsageError);
}

// --- spbench sim-calibrate on rows whose costs are known -------------------------------------------------------

struct Files {
  std::string dir = ::testing::TempDir();
  std::string mc = dir + "cal_measured_coll.csv", sc = dir + "cal_sim_coll.csv", mo = dir + "cal_measured_op.csv",
              so = dir + "cal_sim_op.csv", stages = dir + "cal_stages.csv", calib = dir + "cal_c0.calib",
              out = dir + "cal_c1.calib";
};

const std::vector<std::string> kColumns = {"level", "method", "backend", "world_size", "nodes", "pass", "timing",
                                           "bytes", "dv", "block_elems", "blocks", "tokens_per_rank", "heads",
                                           "time_ms_median", "stage", "calls_per_iter"};

void collective_row(CsvAppender& csv, const std::string& method, const std::string& backend, double bytes,
                    double blocks, double seconds) {
  ResultRow r;
  r.set("level", std::string("collective")).set("method", method).set("backend", backend).set("world_size", 2);
  r.set("nodes", 1).set("pass", std::string("comm")).set("timing", std::string("back_to_back"));
  r.set("bytes", (long long)bytes).set("dv", 128).set("block_elems", method == "allscan" ? 16384LL : 0LL);
  r.set("blocks", (long long)blocks).set("tokens_per_rank", 0).set("heads", 0).set("time_ms_median", seconds * 1e3);
  csv.append(r);
}

void operator_row(CsvAppender& csv, double tokens, double seconds) {
  ResultRow r;
  r.set("level", std::string("operator")).set("method", std::string("dp")).set("backend", std::string("nccl"));
  r.set("world_size", 2).set("nodes", 1).set("pass", std::string("fwd_bwd")).set("tokens_per_rank", (long long)tokens);
  r.set("heads", 16).set("time_ms_median", seconds * 1e3);
  csv.append(r);
}

TEST(SimCalibrate, FitsTheCostsTheRowsLeft) {
  Files f;
  for (const std::string& p : {f.mc, f.sc, f.mo, f.so, f.stages, f.out}) std::remove(p.c_str());
  // The measured rows: the simulated time plus a known cost of the pattern's call (its own bytes: the all-gather's
  // piece with its decay, the all-to-all's piece per peer).
  SimCost p2p, group, ag, a2a;
  p2p.call_s = 15e-6, p2p.byte_s = 0.5e-12;
  group.call_s = 11e-6, group.byte_s = 1e-12;
  ag.call_s = 10e-6, ag.byte_s = 0, ag.split_bytes = 1 << 21, ag.above_call_s = 20e-6, ag.above_byte_s = 1.5e-12;
  a2a.call_s = 14e-6, a2a.byte_s = 2.5e-12;
  {
    CsvAppender m(f.mc, kColumns), s(f.sc, kColumns);
    for (double b = 65536; b <= 33554432; b *= 2) {
      const double sim = 5e-6 + b / 365.8e9;
      collective_row(s, "chain", "nccl", b, 0, sim), collective_row(m, "chain", "nccl", b, 0, sim + p2p.seconds(b));
      collective_row(s, "ring", "nccl", b, 0, sim), collective_row(m, "ring", "nccl", b, 0, sim + group.seconds(b));
      collective_row(s, "allgather", "nccl", b, 0, sim);
      collective_row(m, "allgather", "nccl", b, 0, sim + ag.seconds(b * (1 + 1.0 / 128)));
      collective_row(s, "alltoall", "nccl", b, 0, sim);
      collective_row(m, "alltoall", "nccl", b, 0, sim + a2a.seconds(b / 2));
      // the device All-Scan: 2 us of start on its one block, 0.25 us a block beyond
      const double blocks = b / 65536;
      collective_row(s, "allscan", "device-ll16", b, blocks, sim);
      collective_row(m, "allscan", "device-ll16", b, blocks, sim + (blocks == 1 ? 2e-6 : 0.25e-6 * blocks));
    }
    CsvAppender mo(f.mo, kColumns), so(f.so, kColumns), st(f.stages, kColumns);
    for (double L : {16384.0, 32768.0}) {
      operator_row(so, L, 1e-3), operator_row(mo, L, 1e-3 - 100 * 1e-6);  // 100 stage calls, 1 us less each
      ResultRow r;
      r.set("level", std::string("stage")).set("method", std::string("dp")).set("world_size", 2);
      r.set("tokens_per_rank", (long long)L).set("heads", 16).set("calls_per_iter", 100);
      st.append(r);
    }
  }
  std::FILE* c0 = std::fopen(f.calib.c_str(), "w");
  std::fputs("gpu = test\ngpu_copy_bytes_per_s = 1e12\nstage_offset_s = 0\ndevice_call_s = 0\n", c0);
  std::fputs("device_block_s = 0\n", c0);
  for (const char* t : {"nccl_p2p", "nccl_group", "nccl_allgather", "nccl_alltoall", "nccl_allreduce"})
    std::fprintf(c0, "%s_call_s = 0\n%s_byte_s = 0\n", t, t);
  std::fclose(c0);

  CalibrationOptions o{f.mc, f.mo, f.sc, f.so, f.calib, f.stages, f.out};
  ASSERT_EQ(run_sim_calibrate(o), 0);
  const SimTransport t = read_sim_calibration(f.out).transport;
  // Two lines each; where the rows are one line, both lines are it (to the rows' 6 digits).
  for (double b : {65536.0, 1048576.0, 33554432.0}) {
    EXPECT_NEAR(t.nccl_p2p.seconds(b), p2p.seconds(b), 2e-9) << b;
    EXPECT_NEAR(t.nccl_group.seconds(b), group.seconds(b), 2e-9) << b;
    EXPECT_NEAR(t.nccl_allgather.seconds(b * (1 + 1.0 / 128)), ag.seconds(b * (1 + 1.0 / 128)), 2e-9) << b;
    EXPECT_NEAR(t.nccl_alltoall.seconds(b / 2), a2a.seconds(b / 2), 2e-9) << b;
    EXPECT_EQ(t.nccl_allreduce.seconds(b), t.nccl_allgather.seconds(b)) << b;  // the all-gather's, said as such
  }
  EXPECT_EQ(t.nccl_allgather.split_bytes, ag.split_bytes * (1 + 1.0 / 128));  // the piece's bytes, decay and all
  EXPECT_NEAR(t.device_call_s, 2e-6, 1e-9);
  EXPECT_NEAR(t.device_block_s, 0.25e-6, 1e-11);
  EXPECT_NEAR(read_sim_calibration(f.out).gpu.stage_offset_s, -1e-6, 1e-11);
}

}  // namespace
}  // namespace spb
