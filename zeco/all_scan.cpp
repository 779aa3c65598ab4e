#include "zeco/all_scan.h"

#include <algorithm>
#include <string>

#include "harness/error.h"

namespace spb {

void validate_blocks(size_t rows, int blocks) {
  SPB_USAGE(blocks >= 1 && rows % size_t(blocks) == 0,
            "--blocks: K=" + std::to_string(blocks) + " must be >= 1 and divide the state's rows B*H*dk=" +
                std::to_string(rows) + " (blocks are whole rows of dv elements)");
}

const char* const kDefaultDeviceAllScan = "device-ll16";

const std::vector<std::string>& allscan_names() {
  static const std::vector<std::string> v = {"host", "device", "device-flag", "device-ll", "device-ll16", "auto"};
  return v;
}

std::string resolve_allscan(const std::string& name, bool gpu) {
  const std::string r = name == "auto" ? (gpu ? kDefaultDeviceAllScan : "host")
                        : name == "device" ? kDefaultDeviceAllScan
                                           : name;
  // "device" and "auto" resolved above, so what is left must be one of the concrete names.
  SPB_USAGE(r != "auto" && r != "device" && std::count(allscan_names().begin(), allscan_names().end(), r),
            "--allscan: '" + name + "' does not exist; choose one of host, device, device-flag, device-ll, "
            "device-ll16, auto");
  SPB_USAGE(!is_device_allscan(r) || gpu, "--allscan " + name + ": needs --backend gpu");
  return r;
}

bool is_device_allscan(const std::string& resolved) { return resolved.rfind("device", 0) == 0; }

void all_scan_host(Runtime& rt, const AllScanArgs& a, Stream st) {
  validate_blocks(a.rows, a.blocks);
  const int p = rt.comm->rank(), P = rt.comm->size();
  const bool fwd = a.direction == ScanDirection::forward;
  const int prev = fwd ? p - 1 : p + 1;  // where the carry comes from
  const int next = fwd ? p + 1 : p - 1;  // where it goes
  const bool has_prev = prev >= 0 && prev < P, has_next = next >= 0 && next < P;
  const size_t block_rows = a.rows / a.blocks, block_elems = block_rows * a.cols, block_bytes = block_elems * 4;

  if (!has_prev) {
    if (a.first) rt.dev->copy(a.carry_in, a.first, a.rows * a.cols * 4, st);
    else rt.dev->fill_zero(a.carry_in, a.rows * a.cols * 4, st);
  }
  for (int b = 0; b < a.blocks; ++b) {
    const size_t off = size_t(b) * block_elems;
    if (has_prev) rt.comm->recv(a.carry_in + off, block_bytes, prev, st);
    rt.kern->state_fold(block_rows, a.cols, a.decay + size_t(b) * block_rows, a.carry_in + off, a.local + off,
                        a.carry_out + off, st);
    if (has_next) rt.comm->send(a.carry_out + off, block_bytes, next, st);
  }
}

}  // namespace spb
