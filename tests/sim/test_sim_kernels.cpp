// The simulated kernels' memory-bound stages (sim/sim_kernels.cpp): a size the stage table lacks takes the nearest
// recorded size's time and the difference in size at the stage's marginal rate.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "runtime/csv.h"
#include "runtime/error.h"
#include "sim/sim_runtime.h"

namespace spb {
namespace {

std::string stage_table(const std::vector<std::pair<std::string, std::string>>& rows, const std::vector<double>& ms) {
  const std::string path = ::testing::TempDir() + "kernel_stages.csv";
  std::remove(path.c_str());
  CsvAppender csv(path, stage_columns());
  for (size_t i = 0; i < rows.size(); ++i) {
    ResultRow r;
    r.set("level", std::string("stage")).set("method", std::string("dp")).set("pass", std::string("stage"));
    r.set("stage", rows[i].first).set("shape", rows[i].second).set("time_ms_median", ms[i]);
    csv.append(r);
  }
  return path;
}

// The seconds one call takes on a fresh simulated device (copy rate 1.2 TB/s: 12 bytes an element take 10 ps).
template <class Call>
double seconds_of(const std::string& table, Call&& call) {
  SimGpu gpu;
  gpu.copy_Bps = 1.2e12;
  SimDevice dev(make_manual_clock(), gpu);
  auto kern = make_sim_kernels(dev, StageTable(table));
  const Stream s = dev.compute_stream();
  call(*kern, s);
  return dev.stream_time(s);
}

TEST(SimKernels, AMemoryBoundStageScalesFromItsNearestRecordedSize) {
  const std::string t = stage_table({{"state_fold", "rows2048 cols128"},
                                     {"copy_4d", "bytes1048576"},
                                     {"copy_4d", "bytes2097152"}},
                                    {0.5, 1.0, 1.5});
  auto fold = [&](size_t rows) {
    return seconds_of(t, [&](GlaKernels& k, Stream s) {
      k.state_fold(rows, 128, nullptr, nullptr, nullptr, nullptr, s);
    });
  };
  EXPECT_DOUBLE_EQ(fold(2048), 0.5e-3);  // recorded
  // One size recorded: the bytes a fold moves besides (two fp32 read, one written) at the copy rate, above and below;
  // a rate through zero would have made 4096 rows 1 ms and 128 rows 31 us.
  EXPECT_NEAR(fold(4096), 0.5e-3 + 262144 * 1e-11, 1e-15);
  EXPECT_NEAR(fold(128), 0.5e-3 - (262144 - 16384) * 1e-11, 1e-15);
  // Two sizes recorded: their slope (0.5 ms a MiB), from the nearer one.
  const int64_t dims[4] = {1, 1, 1, 4 << 20}, strides[4] = {0, 0, 0, 1};
  const double copy = seconds_of(t, [&](GlaKernels& k, Stream s) {
    k.copy_4d(nullptr, nullptr, 1, dims, strides, strides, s);
  });
  EXPECT_NEAR(copy, 1.5e-3 + 2 * 0.5e-3, 1e-12);
  // A stage with no row at all says so.
  const std::string copies = stage_table({{"copy_4d", "bytes1048576"}}, {1.0});
  try {
    seconds_of(copies, [&](GlaKernels& k, Stream s) {
      k.state_fold(2048, 128, nullptr, nullptr, nullptr, nullptr, s);
    });
    FAIL() << "no error for a stage the table lacks";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no row of state_fold"), std::string::npos) << e.what();
  }
}

// A vector add the table has no row of (a table of one GPU: no two ranks' maps compose there; zeco's rail-logdepth
// across three nodes or more adds decays) takes the fold's rows, the same traffic an element; a table with neither
// says so.
TEST(SimKernels, AVectorAddTheTableLacksTakesTheFoldsRows) {
  const std::string folds = stage_table({{"state_fold", "rows1024 cols64"}}, {0.0055});
  auto add = [&](const std::string& t, size_t n) {
    return seconds_of(t, [&](GlaKernels& k, Stream s) { k.vec_add(n, nullptr, nullptr, nullptr, s); });
  };
  EXPECT_NEAR(add(folds, 65536), 0.0055e-3, 1e-15);  // the fold's size: its time
  EXPECT_NEAR(add(folds, 1024), 0.0055e-3 - (65536 - 1024) * 1e-11, 1e-15);  // less the traffic it does not move
  // Its own rows, where the table has them, come first.
  const std::string both = stage_table({{"state_fold", "rows1024 cols64"}, {"vec_add", "n1024"}}, {0.0055, 0.004});
  EXPECT_DOUBLE_EQ(add(both, 1024), 0.004e-3);
  try {
    add(stage_table({{"copy_4d", "bytes1048576"}}, {1.0}), 1024);
    FAIL() << "no error for a table with neither a vector add nor a fold";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no row of vec_add (nor of state_fold"), std::string::npos) << e.what();
  }
}

// Gated DeltaNet's dense map (sim/sim_gdn_kernels.cpp): a shape the table lacks (another K, another scan) takes the
// stage's nearest recorded shape by work plus the difference in work at its marginal rate.
TEST(SimGdnKernels, TheDenseMapScalesFromItsNearestRecordedShape) {
  auto apply_s = [&](const std::string& t, size_t heads, size_t cols) {
    SimGpu gpu;
    gpu.copy_Bps = 1.2e12;
    SimDevice dev(make_manual_clock(), gpu);
    auto k = make_sim_gdn_kernels(dev, StageTable(t), DType::f32);
    const Stream s = dev.compute_stream();
    k->dense_apply(heads, 128, cols, nullptr, nullptr, nullptr, nullptr, s);
    return dev.stream_time(s);
  };
  const std::string one = stage_table({{"gdn_dense_apply", "heads16 n128 cols8"}}, {0.01});
  EXPECT_DOUBLE_EQ(apply_s(one, 16, 8), 0.01e-3);  // recorded
  // One shape recorded: the bytes the call moves besides (A, and x, b, out of its columns) at the copy rate.
  EXPECT_NEAR(apply_s(one, 16, 128), 0.01e-3 + 4.0 * 16 * 3 * 128 * (128 - 8) / 1.2e12, 1e-15);
  EXPECT_NEAR(apply_s(one, 32, 8), 0.01e-3 + 4.0 * 16 * (128 * 128 + 3 * 128 * 8) / 1.2e12, 1e-15);
  // Two recorded: their slope over the work (heads n n cols), from the nearer one.
  const std::string two =
      stage_table({{"gdn_dense_apply", "heads16 n128 cols8"}, {"gdn_dense_apply", "heads16 n128 cols16"}},
                  {0.01, 0.014});
  const double per = 0.004e-3 / (16.0 * 128 * 128 * 8);
  EXPECT_NEAR(apply_s(two, 16, 128), 0.014e-3 + per * 16 * 128 * 128 * 112, 1e-15);
  EXPECT_NEAR(apply_s(two, 16, 4), 0.01e-3 - per * 16 * 128 * 128 * 4, 1e-15);
}

}  // namespace
}  // namespace spb
