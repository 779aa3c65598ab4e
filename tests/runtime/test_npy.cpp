// .npy reading and writing: a round trip, a slice without reading the rest, and every malformed file a user can hand
// in failing with a message that names the file and what is wrong.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <limits>

#include "runtime/error.h"
#include "runtime/npy.h"

namespace spb {
namespace {

std::string tmp(const std::string& name) { return testing::TempDir() + "/spb_npy_" + name; }

void write_raw(const std::string& path, const std::string& header_dict, size_t data_bytes) {
  std::string h = header_dict;
  h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
  h += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const char len[2] = {char(h.size() & 0xff), char(h.size() >> 8)};
  out.write(len, 2);
  out << h;
  out << std::string(data_bytes, '\0');
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Npy, RoundTripAndSlice) {
  const std::vector<size_t> shape = {2, 5, 3, 4};
  std::vector<float> x(2 * 5 * 3 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.5f - 7.f;
  write_npy(tmp("rt.npy"), shape, x.data());
  EXPECT_EQ(read_npy(tmp("rt.npy"), shape), x);
  EXPECT_EQ(read_npy_header(tmp("rt.npy")).data_offset % 64, 0u);
  // tokens [1, 3) of both batch elements
  const std::vector<float> s = read_npy_axis1_slice(tmp("rt.npy"), shape, 1, 3);
  ASSERT_EQ(s.size(), 2u * 2 * 12);
  for (size_t b = 0; b < 2; ++b)
    for (size_t t = 0; t < 2; ++t)
      for (size_t e = 0; e < 12; ++e) EXPECT_EQ(s[(b * 2 + t) * 12 + e], x[(b * 5 + t + 1) * 12 + e]);
}

TEST(Npy, NonFiniteInputsAreRefusedNamingTheFile) {
  const std::string p = tmp("nan.npy");
  std::vector<float> x(2 * 3 * 1 * 2, 1.0f);
  x[4] = std::numeric_limits<float>::infinity();
  write_npy(p, {2, 3, 1, 2}, x.data());
  try {
    read_npy(p, {2, 3, 1, 2});
    ADD_FAILURE() << "an Inf was read";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(p + ": element 4 is inf, not a finite number"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_npy_axis1_slice(p, {2, 3, 1, 2}, 0, 3), UsageError);
  EXPECT_NO_THROW(read_npy_axis1_slice(p, {2, 3, 1, 2}, 0, 1));  // the Inf is in token 2 of sequence 0, not read
}

TEST(Npy, BadFilesSayWhatIsWrong) {
  EXPECT_NE(error_of([] { read_npy(tmp("missing.npy"), {1}); }).find("missing.npy: cannot open"), std::string::npos);

  std::ofstream(tmp("garbage.npy")) << "this is not numpy";
  EXPECT_NE(error_of([] { read_npy(tmp("garbage.npy"), {1}); }).find("not a .npy file"), std::string::npos);

  write_raw(tmp("f64.npy"), "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16);
  EXPECT_NE(error_of([] { read_npy(tmp("f64.npy"), {2}); }).find("dtype '<f8', expected float32"), std::string::npos);

  write_raw(tmp("fortran.npy"), "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16);
  EXPECT_NE(error_of([] { read_npy(tmp("fortran.npy"), {2, 2}); }).find("Fortran order"), std::string::npos);

  write_raw(tmp("short.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }", 20);
  EXPECT_NE(error_of([] { read_npy(tmp("short.npy"), {4, 4}); }).find("truncated"), std::string::npos);

  const std::vector<float> x(6, 1.f);
  write_npy(tmp("shape.npy"), {2, 3}, x.data());
  EXPECT_NE(error_of([] { read_npy(tmp("shape.npy"), {3, 2}); }).find("shape (2, 3), expected (3, 2)"),
            std::string::npos);
}

}  // namespace
}  // namespace spb
