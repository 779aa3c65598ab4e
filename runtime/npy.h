// NumPy .npy files (format versions 1-3), float32 little-endian, C order: how a user hands spbench a whole
// sequence and gets the results back, to check any method against PyTorch or another reference.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace spb {

struct NpyHeader {
  std::vector<size_t> shape;
  size_t data_offset = 0;  // bytes from the start of the file to the first element
};

std::string shape_str(const std::vector<size_t>& shape);  // "(1, 64, 2, 16)"

// Throws UsageError naming the file: missing, not .npy, not '<f4', Fortran order, or truncated.
NpyHeader read_npy_header(const std::string& path);
std::vector<float> read_npy(const std::string& path, const std::vector<size_t>& expected_shape);
// Rows [r0, r1) of axis 1 of a 4-D array (the tokens of one rank in [B, T, H, D]), without reading the rest.
std::vector<float> read_npy_axis1_slice(const std::string& path, const std::vector<size_t>& expected_shape, size_t r0,
                                        size_t r1);
void write_npy(const std::string& path, const std::vector<size_t>& shape, const float* data);

}  // namespace spb
