// The device-initiated All-Scan (DESIGN §3, backend `device`): one persistent kernel per rank spins on a flag in its
// own registered window, folds block k and stores it straight into the next rank's window over NVLink, then releases
// that rank's flag. Flags carry a monotonically increasing epoch, so they never need resetting.
#pragma once

#include <cstddef>
#include <memory>

#include "zeco/all_scan.h"

namespace spb {

class DeviceAllScan {
 public:
  virtual ~DeviceAllScan() = default;
  // Same contract as all_scan_host; `a.rows * a.cols` must not exceed the capacity given at creation.
  virtual void run(const AllScanArgs& a, Stream st) = 0;
};

// Collective over rt.comm (an NCCL communicator): every rank calls it with the same capacity (fp32 elements).
// Throws UsageError when peers cannot reach each other's memory (no NVLink/P2P), naming the ranks.
std::unique_ptr<DeviceAllScan> make_device_all_scan(Runtime& rt, size_t max_elems);

}  // namespace spb
