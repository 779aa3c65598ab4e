// The simulated device's clocks (sim/sim_device.h) on a clock moved by hand, and the stage table (sim/stage_table.h):
// what every simulated time rests on.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "runtime/csv.h"
#include "runtime/error.h"
#include "sim/sim_device.h"
#include "sim/stage_table.h"

namespace spb {
namespace {

SimDevice make_device(double offset = 0) {
  SimGpu gpu;
  gpu.stage_offset_s = offset;
  return SimDevice(make_manual_clock(), gpu);
}

TEST(SimDevice, KernelsOnOneStreamAddUpAndTheHostDoesNotWait) {
  SimDevice dev = make_device();
  const Stream c = dev.compute_stream();
  EventHandle e0(dev), e1(dev);
  dev.record(e0.get(), c);
  dev.run_kernel(c, 1.0);
  dev.run_kernel(c, 2.0);
  dev.record(e1.get(), c);
  EXPECT_DOUBLE_EQ(dev.elapsed_ms(e0.get(), e1.get()), 3000.0);
  EXPECT_DOUBLE_EQ(dev.clock().now(), 0.0);  // enqueued, not waited for
  dev.synchronize();
  EXPECT_DOUBLE_EQ(dev.clock().now(), 3.0);
}

TEST(SimDevice, CommunicationOverlapsTheComputeStream) {
  SimDevice dev = make_device();
  const Stream c = dev.compute_stream(), m = dev.comm_stream();
  dev.run_kernel(c, 5.0);  // compute, 0..5
  dev.host_reaches(m);     // an idle stream: the operation starts at once
  dev.clock().advance_to(2.0);
  dev.stream_done_now(m);  // the communication took 0..2, beside the kernel
  dev.run_kernel(c, 1.0);  // the host enqueued it before the communication: 5..6
  EXPECT_DOUBLE_EQ(dev.stream_time(c), 6.0);
  EXPECT_DOUBLE_EQ(dev.stream_time(m), 2.0);
  // A wait orders the streams: the communication stream's next operation waits for the compute stream's event.
  EventHandle done(dev);
  dev.record(done.get(), c);
  dev.wait(m, done.get());
  dev.host_reaches(m);
  EXPECT_DOUBLE_EQ(dev.clock().now(), 6.0);
  dev.synchronize();
  EXPECT_DOUBLE_EQ(dev.clock().now(), 6.0);
}

TEST(SimDevice, TheStageOffsetShortensEveryStageButNoneBelowZero) {
  SimDevice dev = make_device(-0.5);
  const Stream c = dev.compute_stream();
  dev.run_kernel(c, 2.0);
  dev.run_kernel(c, 0.25);
  EXPECT_DOUBLE_EQ(dev.stream_time(c), 1.5);
}

TEST(SimDevice, AfterKernelTellsACallsStartFromItsBlocks) {
  SimDevice dev = make_device();
  const Stream m = dev.comm_stream();
  EXPECT_FALSE(dev.after_kernel(m));
  dev.fill_zero(nullptr, 64, m);
  EXPECT_TRUE(dev.after_kernel(m));
  dev.host_reaches(m);
  dev.stream_done_now(m);
  EXPECT_FALSE(dev.after_kernel(m));
}

std::string write_stage_table(const std::string& name, const std::vector<std::pair<std::string, std::string>>& rows,
                              double ms) {
  const std::string path = ::testing::TempDir() + name;
  std::remove(path.c_str());
  CsvAppender csv(path, stage_columns());
  for (auto& [stage, shape] : rows) {
    ResultRow r;
    r.set("level", std::string("stage")).set("method", std::string("dp")).set("pass", std::string("stage"));
    r.set("stage", stage).set("shape", shape).set("time_ms_median", ms).set("time_ms_mean", ms);
    csv.append(r);
  }
  return path;
}

TEST(StageTable, ReadsTimesAndSaysWhichShapeIsMissing) {
  GlaShape s;
  s.B = 1, s.T = 16384, s.H = 16, s.dk = 128, s.dv = 128;
  const std::string key = stage_shape_key(s);
  EXPECT_EQ(key, "B1 T16384 H16 dk128 dv128 pairs16");
  const StageTable t(write_stage_table("stages.csv", {{"chunk_output", key}, {"state_fold", "rows2048 cols128"}}, 0.5));
  EXPECT_DOUBLE_EQ(t.seconds("chunk_output", key), 5e-4);
  EXPECT_DOUBLE_EQ(t.seconds("state_fold", "rows2048 cols128"), 5e-4);
  try {
    t.seconds("chunk_grads", key);
    FAIL() << "no error for a stage the table lacks";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("chunk_grads at " + key), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace spb
