#include "runtime/gpu_peak.h"

#include <cmath>

namespace spb {

double datasheet_bf16_tflops(const std::string& gpu_name) {
  // Vendor datasheets, dense bf16 (half the "with sparsity" figure). More specific names come first: "H100 PCIe"
  // must not match the SXM entry.
  struct Entry {
    const char* name_part;
    double tflops;
  };
  static const Entry kTable[] = {
      {"H200 NVL", 835.5}, {"H200", 989.4},       {"H100 NVL", 835.5}, {"H100 PCIe", 756.5},
      {"H100", 989.4},     {"H800 PCIe", 756.5},  {"H800", 989.4},     {"GH200", 989.4},
      {"A100", 312.0},     {"A800", 312.0},
  };
  for (const Entry& e : kTable)
    if (gpu_name.find(e.name_part) != std::string::npos) return e.tflops;
  return NAN;
}

}  // namespace spb
