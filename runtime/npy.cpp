#include <cmath>
#include "runtime/npy.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <regex>

#include "runtime/error.h"

namespace spb {

std::string shape_str(const std::vector<size_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

namespace {

size_t product(const std::vector<size_t>& shape) {
  size_t n = 1;
  for (size_t d : shape) n *= d;
  return n;
}

std::ifstream open_checked(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SPB_USAGE(bool(in), path + ": cannot open (missing or unreadable .npy file)");
  return in;
}

void check_shape(const std::string& path, const NpyHeader& h, const std::vector<size_t>& expected) {
  SPB_USAGE(h.shape == expected,
            path + ": shape " + shape_str(h.shape) + ", expected " + shape_str(expected));
}

}  // namespace

NpyHeader read_npy_header(const std::string& path) {
  std::ifstream in = open_checked(path);
  char magic[8] = {0};
  in.read(magic, 8);
  SPB_USAGE(in && std::memcmp(magic, "\x93NUMPY", 6) == 0, path + ": not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(magic[6]);
  SPB_USAGE(major >= 1 && major <= 3, path + ": unsupported .npy version " + std::to_string(major));
  size_t header_len = 0;
  unsigned char len_bytes[4] = {0};
  const int nlen = major == 1 ? 2 : 4;
  in.read(reinterpret_cast<char*>(len_bytes), nlen);
  for (int i = nlen - 1; i >= 0; --i) header_len = header_len * 256 + len_bytes[i];
  std::string header(header_len, '\0');
  in.read(&header[0], header_len);
  SPB_USAGE(bool(in), path + ": truncated .npy header");

  std::smatch m;
  SPB_USAGE(std::regex_search(header, m, std::regex("'descr'\\s*:\\s*'([^']*)'")), path + ": malformed header (no descr)");
  SPB_USAGE(m[1] == "<f4", path + ": dtype '" + m[1].str() + "', expected float32 ('<f4')");
  SPB_USAGE(std::regex_search(header, m, std::regex("'fortran_order'\\s*:\\s*(True|False)")),
            path + ": malformed header (no fortran_order)");
  SPB_USAGE(m[1] == "False", path + ": Fortran order; save it in C order (np.ascontiguousarray)");
  SPB_USAGE(std::regex_search(header, m, std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)")), path + ": malformed header (no shape)");
  NpyHeader h;
  const std::string dims = m[1];
  std::regex num("\\d+");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), num); it != std::sregex_iterator(); ++it)
    h.shape.push_back(std::stoull(it->str()));
  h.data_offset = size_t(nlen) + 8 + header_len;

  in.seekg(0, std::ios::end);
  const size_t file_bytes = size_t(in.tellg());
  SPB_USAGE(file_bytes >= h.data_offset + product(h.shape) * 4,
            path + ": truncated: " + shape_str(h.shape) + " float32 needs " + std::to_string(product(h.shape) * 4) +
                " bytes of data, the file has " + std::to_string(file_bytes - h.data_offset));
  return h;
}

namespace {
// Inputs are measured and checked against a reference: a NaN or Inf would only make every method "wrong".
void require_finite(const std::string& path, const std::vector<float>& data) {
  for (size_t i = 0; i < data.size(); ++i)
    SPB_USAGE(std::isfinite(data[i]), path + ": element " + std::to_string(i) + " is " + std::to_string(data[i]) +
                                          ", not a finite number; spbench takes finite inputs only");
}
}  // namespace

std::vector<float> read_npy(const std::string& path, const std::vector<size_t>& expected_shape) {
  NpyHeader h = read_npy_header(path);
  check_shape(path, h, expected_shape);
  std::vector<float> data(product(h.shape));
  std::ifstream in = open_checked(path);
  in.seekg(h.data_offset);
  in.read(reinterpret_cast<char*>(data.data()), data.size() * 4);
  SPB_USAGE(bool(in), path + ": read failed");
  require_finite(path, data);
  return data;
}

std::vector<float> read_npy_axis1_slice(const std::string& path, const std::vector<size_t>& expected_shape, size_t r0,
                                        size_t r1) {
  NpyHeader h = read_npy_header(path);
  check_shape(path, h, expected_shape);
  SPB_CHECK(h.shape.size() == 4 && r0 <= r1 && r1 <= h.shape[1], "bad slice of " + path);
  const size_t row = h.shape[2] * h.shape[3], rows = r1 - r0;
  std::vector<float> data(h.shape[0] * rows * row);
  std::ifstream in = open_checked(path);
  for (size_t b = 0; b < h.shape[0]; ++b) {
    in.seekg(h.data_offset + ((b * h.shape[1] + r0) * row) * 4);
    in.read(reinterpret_cast<char*>(data.data() + b * rows * row), rows * row * 4);
  }
  SPB_USAGE(bool(in), path + ": read failed");
  require_finite(path, data);
  return data;
}

void write_npy(const std::string& path, const std::vector<size_t>& shape, const float* data) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_str(shape) + ", }";
  // Pad so that the data starts at a multiple of 64 bytes, ending the header with a newline (format 1.0).
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  SPB_USAGE(bool(out), path + ": cannot create");
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = uint16_t(header.size());
  const char len_bytes[2] = {char(len & 0xff), char(len >> 8)};
  out.write(len_bytes, 2);
  out.write(header.data(), header.size());
  out.write(reinterpret_cast<const char*>(data), product(shape) * 4);
  SPB_USAGE(bool(out), path + ": write failed");
}

}  // namespace spb
