// All-Scan (ZeCO): the exclusive scan over ranks of the affine map  S -> diag(exp decay_p) S + local_p,
// pipelined in K blocks of whole state rows. Rows decay independently (the decay is diagonal in dk), so block k of
// a rank's output needs only block k of its input: rank p forwards block k to the next rank as soon as it has it,
// and the scan costs about one state's transfer plus P-1 block hops instead of P-1 whole-state hops.
//
// Forward direction: rank 0 starts from `first` (h0), carry_in(p) = S_in(p), carry_out(p) = S_in(p+1).
// Reverse direction: rank P-1 starts from `first` (dht), carry_in(p) = dS_out(p), carry_out(p) = dS_out(p-1);
// rank 0's carry_out is dh0 of the whole sequence.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "harness/runtime.h"

namespace spb {

enum class ScanDirection { forward, reverse };

struct AllScanArgs {
  ScanDirection direction = ScanDirection::forward;
  size_t rows = 0, cols = 0;     // the state as a rows x cols fp32 matrix; row r decays by exp(decay[r])
  int blocks = 1;                // K; must divide rows
  const float* decay = nullptr;  // [rows] this rank's total log-decay
  const float* local = nullptr;  // [rows, cols] this rank's own contribution (M_p or D_p)
  const float* first = nullptr;  // [rows, cols] the scan's start on the first rank (nullptr: zero)
  float* carry_in = nullptr;     // [rows, cols] out: what reached this rank
  float* carry_out = nullptr;    // [rows, cols] out: diag(exp decay) carry_in + local, handed on
};

// The host-driven All-Scan over the runtime's communicator (MPI on CPU ranks, NCCL on GPUs): per block a recv, a
// fold and a send, all ordered on `st`.
void all_scan_host(Runtime& rt, const AllScanArgs& a, Stream st);

// Checks K against the state; throws UsageError naming the flag.
void validate_blocks(size_t rows, int blocks);

// The All-Scan backends, as --allscan names them (and as the `backend` column of a result row records them):
//   host         all_scan_host over the runtime's communicator (MPI on CPU ranks, NCCL on GPUs)
//   device-flag  the device kernel, K blocks per call, a fence and a release flag per block piece
//   device-ll    the device kernel, {value, tag} 8-byte words: no fence, no flag (zeco/all_scan_device.cu)
//   device-ll16  the device kernel, {3 values, tag} 16-byte words
//   device       the default device protocol (kDefaultDeviceAllScan)
//   auto         the default device protocol on GPUs, host on CPUs
// Rows written before the protocols had names say `device` for device-flag.
extern const char* const kDefaultDeviceAllScan;
const std::vector<std::string>& allscan_names();  // what --allscan accepts
// The name a row records for `name`; UsageError for a name that does not exist, or a device one on CPUs.
std::string resolve_allscan(const std::string& name, bool gpu);
bool is_device_allscan(const std::string& resolved);

}  // namespace spb
