// The device-initiated All-Scan (DESIGN §3, backend `device`): one persistent kernel per rank spins on a flag in its
// own registered window, folds block k and stores it straight into the next rank's window over NVLink, then releases
// that rank's flag. Flags carry a monotonically increasing epoch, so they never need resetting.
//
// The design in full is in the header comments of zeco/all_scan_device.cu (transport, windows) and
// zeco/all_scan_device_protocols.cu (flag and packet protocols, buffer reuse, timeouts).
// Environment (read on rank 0 at creation and broadcast, so every rank agrees):
//   SPB_ALLSCAN_TRANSPORT  auto (default: NCCL symmetric windows + LSA pointers where NCCL offers them, else CUDA
//                          IPC), nccl (NCCL only) or ipc (CUDA IPC handles exchanged through the bootstrap)
//   SPB_ALLSCAN_CTAS       CTAs of the persistent kernel, 1..128 (default: the creator's, else 32 for device-flag,
//                          128 for the packet protocols; zeco --overlap 2 asks for 16), 512 threads each; device-flag
//                          splits a block among them, the packet protocols deal 16-byte units round-robin to the
//                          threads
//   SPB_ALLSCAN_UNROLL     device-ll / device-ll16: units per thread and round, 1, 2, 4 or 8 (default 1): how many
//                          units' local loads (and first looks at the receive buffer) a thread issues at once; it
//                          still forwards each unit the moment it arrives
//   SPB_SPIN_TIMEOUT_S     seconds a spin may wait for a peer before the kernel gives up (default 10)
//   SPB_ALLSCAN_TRACE      a path prefix (unset or empty: no trace): every call runs a traced copy of its kernel,
//                          whose CTAs stamp %globaltimer and %clock64 at entry, end of prologue, first unit in from
//                          the previous rank, last unit out, and exit, into a device ring of the last 64 calls. At
//                          destruction each rank r writes <prefix>.rank<r>.csv (rank,epoch,dir,cta,entry_ns,
//                          prologue_ns,first_in_ns,last_out_ns,exit_ns, then call,scan_id,elems,units,smid and the
//                          five stamps' clock64 values; an empty cell: no such event) and <prefix>.rank<r>.meta.csv
//                          (clock64 rate and globaltimer step measured on the GPU, and an estimate of the offset of
//                          rank r-1's globaltimer from rank r's by a ping-pong). The first object of a process to
//                          write a file truncates it, later ones append (scan_id tells them apart). Unset, the
//                          untraced kernels run, identical to a build without the trace. tools/dev_allscan_trace.sh
//                          runs it and prints the breakdown of a call (zeco/NOTES.md, "Where a device All-Scan call's time goes").
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "zeco/all_scan.h"

namespace spb {

class DeviceAllScan : public AllScan {
 public:
  // Same contract as all_scan_host; `a.rows * a.cols` must not exceed the capacity given at creation (UsageError
  // otherwise, as for a K that does not divide the rows). All pointers are device pointers. Collective: every rank
  // calls run() the same number of times, in the same order of directions, ordered on one stream (calls of one
  // object must not run concurrently). Throws spb::Error if an earlier call's kernel gave up waiting for a peer.
  void run(const AllScanArgs& a, Stream st) override = 0;
  // Waits for `st` and throws spb::Error naming the rank that did not arrive if a kernel gave up waiting.
  void check(Stream st) override = 0;
  // "nccl-lsa" or "cuda-ipc": how the peer windows were mapped.
  virtual std::string transport() const = 0;
  // The protocol, as --allscan names it: device-flag, device-ll or device-ll16 (zeco/all_scan.h).
  std::string backend() const override = 0;
};

// Collective over rt.comm (an NCCL communicator): every rank calls it with the same capacity (fp32 elements).
// Throws UsageError when peers cannot reach each other's memory (no NVLink/P2P), naming the ranks, so the caller can
// fall back to the host-driven backend. The object must be destroyed before rt.comm, and by every rank (collective).
// `backend`: a device protocol as --allscan names it ("device" = the default one, see resolve_allscan). `ctas`: the
// kernel's CTAs where SPB_ALLSCAN_CTAS does not set them (0: the protocol's default), the same on every rank.
// `segment` > 0: the scan runs inside every group of `segment` consecutive ranks at once, each group's first rank in
// scan order starting from `first` (the rail All-Scan's step inside each node; only the ranks of one group need to
// reach each other). 0: one group, the world.
std::unique_ptr<DeviceAllScan> make_device_all_scan(Runtime& rt, size_t max_elems,
                                                    const std::string& backend = "device", int ctas = 0,
                                                    int segment = 0);


// --- link probes (collective; the result is returned on every rank) --------------------------------------------
// One-hop flag latency between ranks a and b over the same windows the device All-Scan uses: a flag ping-pong,
// `iters` round trips after a warm-up, timed with %globaltimer on rank a; half the mean round trip, microseconds.
double probe_flag_latency_us(Runtime& rt, int a = 0, int b = 1, int iters = 20000);
// Single-pair bandwidth a -> b: `ctas` CTAs of rank a (0: one per SM) store `bytes` into b's window (16-byte
// stores, then a system fence); median of `reps` timed launches after a warm-up, GB/s (1e9 bytes/s).
double probe_pair_bandwidth_gbs(Runtime& rt, int a = 0, int b = 1, size_t bytes = size_t(256) << 20, int ctas = 0,
                                int reps = 20);

}  // namespace spb
