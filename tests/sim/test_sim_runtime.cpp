// The calibration file (sim/sim_runtime.h): a transport's cost per call and per byte, in one or two lines, and the
// reader's error for each way a file can be malformed.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "runtime/error.h"
#include "sim/sim_runtime.h"

namespace spb {
namespace {

TEST(SimCost, OneLineAndTwo) {
  SimCost c;
  c.call_s = 10e-6, c.byte_s = 1e-12;
  EXPECT_DOUBLE_EQ(c.seconds(0), 10e-6);
  EXPECT_DOUBLE_EQ(c.seconds(1e6), 11e-6);
  c.split_bytes = 2e6, c.above_call_s = 20e-6, c.above_byte_s = 0.5e-12;
  EXPECT_DOUBLE_EQ(c.seconds(1e6), 11e-6);  // below the split: the first line
  EXPECT_DOUBLE_EQ(c.seconds(2e6), 21e-6);  // from the split on: the second
  EXPECT_DOUBLE_EQ(c.seconds(4e6), 22e-6);
}

// A well-formed file: every transport one line, the all-gather two.
std::string good() {
  return "# a comment\n"
         "gpu = NVIDIA H200\n"
         "gpu_copy_bytes_per_s = 4.3e12\n"
         "stage_offset_s = -2e-06   # may be negative\n"
         "nccl_p2p_call_s = 1e-05\nnccl_p2p_byte_s = 2e-12\n"
         "nccl_group_call_s = 1.1e-05\nnccl_group_byte_s = 0\n"
         "nccl_allgather_call_s = 9e-06\nnccl_allgather_byte_s = 5e-12\nnccl_allgather_split_bytes = 2097152\n"
         "nccl_allgather_above_call_s = 2e-05\nnccl_allgather_above_byte_s = 1.5e-12\n"
         "nccl_alltoall_call_s = 1.2e-05\nnccl_alltoall_byte_s = 3e-12\n"
         "nccl_allreduce_call_s = 9e-06\nnccl_allreduce_byte_s = 5e-12\n"
         "device_call_s = 8e-06\ndevice_block_s = 2e-07\n";
}

std::string write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

// The UsageError read_sim_calibration gives for `text` ("" where it reads it).
std::string error_of(const std::string& text) {
  try {
    read_sim_calibration(write("bad.calib", text));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(SimCalibrationFile, ReadsEveryConstant) {
  const SimCalibration c = read_sim_calibration(write("good.calib", good()));
  EXPECT_EQ(c.gpu.name, "NVIDIA H200");
  EXPECT_DOUBLE_EQ(c.gpu.copy_Bps, 4.3e12);
  EXPECT_DOUBLE_EQ(c.gpu.stage_offset_s, -2e-6);
  EXPECT_DOUBLE_EQ(c.transport.nccl_p2p.call_s, 1e-5);
  EXPECT_DOUBLE_EQ(c.transport.nccl_p2p.byte_s, 2e-12);
  EXPECT_EQ(c.transport.nccl_p2p.split_bytes, 0);  // one line
  EXPECT_DOUBLE_EQ(c.transport.nccl_group.call_s, 1.1e-5);
  EXPECT_DOUBLE_EQ(c.transport.nccl_allgather.split_bytes, 2097152);
  EXPECT_DOUBLE_EQ(c.transport.nccl_allgather.above_call_s, 2e-5);
  EXPECT_DOUBLE_EQ(c.transport.nccl_allgather.above_byte_s, 1.5e-12);
  EXPECT_DOUBLE_EQ(c.transport.nccl_alltoall.byte_s, 3e-12);
  EXPECT_DOUBLE_EQ(c.transport.nccl_allreduce.call_s, 9e-6);
  EXPECT_DOUBLE_EQ(c.transport.device_call_s, 8e-6);
  EXPECT_DOUBLE_EQ(c.transport.device_block_s, 2e-7);
}

TEST(SimCalibrationFile, ClearErrorsForAMalformedFile) {
  const std::string g = good();
  EXPECT_EQ(error_of(g), "");
  auto expect = [&](const std::string& text, const std::string& part) {
    const std::string e = error_of(text);
    EXPECT_NE(e.find(part), std::string::npos) << "expected \"" << part << "\" in \"" << e << "\"";
    EXPECT_NE(e.find("bad.calib"), std::string::npos) << e;  // names the file
  };
  expect(g + "nccl_p2p_call_s 3\n", ":20: expected `key = value`, got `nccl_p2p_call_s 3`");
  expect(g + "= 3\n", ":20: expected `key = value`");
  expect(g + "nccl_group_byte_s =\n", ":20: expected `key = value`");
  expect(g + "nccl_p2p_call_s = 3e-6\n", ":20: `nccl_p2p_call_s` given twice (first on line 5)");
  expect(g + "nccl_p2p_cal_s = 3e-6\n", ":20: unknown key `nccl_p2p_cal_s`");
  expect(replaced(g, "nccl_p2p_byte_s = 2e-12", "nccl_p2p_byte_s = 2e-12s"),
         ":6: `nccl_p2p_byte_s = 2e-12s` is not a number >= 0");
  expect(replaced(g, "nccl_p2p_byte_s = 2e-12", "nccl_p2p_byte_s = -2e-12"), "is not a number >= 0");
  expect(replaced(g, "nccl_p2p_byte_s = 2e-12", "nccl_p2p_byte_s = nan"), "is not a number >= 0");
  expect(replaced(g, "nccl_alltoall_byte_s = 3e-12\n", ""), "no `nccl_alltoall_byte_s`");
  expect(replaced(g, "nccl_allgather_above_call_s = 2e-05\n", ""),
         "`nccl_allgather`'s second line needs all of nccl_allgather_split_bytes, nccl_allgather_above_call_s and "
         "nccl_allgather_above_byte_s");
  expect(replaced(g, "nccl_allgather_split_bytes = 2097152", "nccl_allgather_split_bytes = 0"),
         "nccl_allgather_split_bytes must be > 0");
  expect(replaced(g, "gpu_copy_bytes_per_s = 4.3e12", "gpu_copy_bytes_per_s = 0"), "gpu_copy_bytes_per_s must be > 0");
  try {
    read_sim_calibration(::testing::TempDir() + "no-such.calib");
    FAIL() << "no error for a file that does not exist";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no-such.calib: cannot be read"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace spb
