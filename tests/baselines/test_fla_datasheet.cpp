// The PyTorch + fla baseline (baselines/pytorch/fla_baseline.py) divides by its own table of datasheet dense bf16
// peaks, DATASHEET_BF16, beside spbench's (runtime/gpu_peak.cpp): both tables read from their source files, every
// GPU of the Python table must be in spbench's with the same TFLOP/s and in the same order (the first name part that
// matches wins, so the order decides), and a device name resolves to the same peak through both, so that the two
// `mfu` columns divide by the same number.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "runtime/gpu_peak.h"

namespace spb {
namespace {

using Table = std::vector<std::pair<std::string, double>>;  // name part, TFLOP/s, in lookup order

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The text from `start` to the first `end` after it ("" where `start` is absent).
std::string between(const std::string& text, const std::string& start, const std::string& end) {
  const auto a = text.find(start);
  if (a == std::string::npos) return "";
  const auto b = text.find(end, a + start.size());
  return text.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

// Every `open "NAME", VALUE close` pair of `text`, in order.
Table pairs(const std::string& text, const std::string& open, const std::string& close) {
  const std::regex pair("\\" + open + "\\s*\"([^\"]+)\"\\s*,\\s*([0-9.]+)\\s*\\" + close);
  Table t;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), pair); it != std::sregex_iterator(); ++it)
    t.push_back({(*it)[1].str(), std::stod((*it)[2].str())});
  return t;
}

Table python_table() {
  // DATASHEET_BF16 = [("H200 NVL", 835.5), ...]
  return pairs(between(slurp(SPB_SOURCE_DIR "/baselines/pytorch/fla_baseline.py"), "DATASHEET_BF16 = [", "]"), "(",
               ")");
}

Table cpp_table() {
  // static const Entry kTable[] = { {"H200 NVL", 835.5}, ... };
  return pairs(between(slurp(SPB_SOURCE_DIR "/runtime/gpu_peak.cpp"), "kTable[] = {", "};"), "{", "}");
}

// The Python script's lookup: the first entry whose name is part of the device's name, else NaN.
double python_lookup(const Table& t, const std::string& gpu) {
  for (const auto& [name, tflops] : t)
    if (gpu.find(name) != std::string::npos) return tflops;
  return NAN;
}

std::string names(const Table& t) {
  std::string s;
  for (const auto& [name, tflops] : t) s += (s.empty() ? "" : ", ") + name;
  return s;
}

TEST(FlaDatasheet, BothTablesAreRead) {
  const Table py = python_table(), cpp = cpp_table();
  ASSERT_GE(py.size(), 2u) << "DATASHEET_BF16 not found in baselines/pytorch/fla_baseline.py";
  ASSERT_GE(cpp.size(), 2u) << "kTable not found in runtime/gpu_peak.cpp";
  // The table read from gpu_peak.cpp is the one datasheet_bf16_tflops looks up.
  for (const auto& [name, tflops] : cpp) EXPECT_EQ(datasheet_bf16_tflops("NVIDIA " + name), tflops) << name;
}

TEST(FlaDatasheet, PythonEntriesMatchSpbench) {
  const Table py = python_table(), cpp = cpp_table();
  size_t last = 0;  // the C++ position of the previous Python entry
  for (size_t i = 0; i < py.size(); ++i) {
    const auto& [name, tflops] = py[i];
    size_t at = cpp.size();
    for (size_t j = 0; j < cpp.size(); ++j)
      if (cpp[j].first == name) at = j;
    ASSERT_LT(at, cpp.size()) << "fla_baseline.py's GPU \"" << name << "\" is not in runtime/gpu_peak.cpp ("
                              << names(cpp) << ")";
    EXPECT_EQ(cpp[at].second, tflops) << name << ": fla_baseline.py " << tflops << ", gpu_peak.cpp " << cpp[at].second;
    if (i > 0) EXPECT_GT(at, last) << name << " comes before " << py[i - 1].first << " in gpu_peak.cpp, after it in "
                                   << "fla_baseline.py";
    last = at;
  }
  const Table only = [&] {
    Table t;
    for (const auto& e : cpp)
      if (std::isnan(python_lookup(py, e.first))) t.push_back(e);
    return t;
  }();
  if (!only.empty()) std::cout << "note: GPUs that fla_baseline.py leaves without a peak: " << names(only) << "\n";
}

TEST(FlaDatasheet, DeviceNamesResolveAlike) {
  const Table py = python_table(), cpp = cpp_table();
  // The names the devices report (nvidia-smi, cudaGetDeviceProperties), and every name part of both tables.
  std::vector<std::string> gpus = {"NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200",
                                   "NVIDIA H200 NVL", "NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"};
  for (const auto& e : py) gpus.push_back("NVIDIA " + e.first);
  for (const auto& e : cpp) gpus.push_back("NVIDIA " + e.first);
  for (const std::string& gpu : gpus) {
    const double p = python_lookup(py, gpu), c = datasheet_bf16_tflops(gpu);
    if (std::isnan(p)) continue;  // the baseline leaves its mfu empty there (the note above lists them)
    EXPECT_EQ(p, c) << gpu << ": fla_baseline.py " << p << ", gpu_peak.cpp " << c;
  }
}

}  // namespace
}  // namespace spb
