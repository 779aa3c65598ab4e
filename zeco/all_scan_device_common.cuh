// What the files of the device-initiated All-Scan share (internal to zeco/all_scan_device*.cu):
//   all_scan_device.cu            transport and windows, settings, the host class (DeviceAllScanImpl), the link probes
//   all_scan_device_protocols.cu  the kernels of the three protocols (device-flag, device-ll, device-ll16): credits,
//                                 acks, buffer reuse, timeouts
//   all_scan_device_trace.cu      the trace's clock kernels and its files (SPB_ALLSCAN_TRACE)
// Here: the kernels' block size and CTA counts, the error records in mapped host memory, the memory-model helpers
// (system scope, from kernels/cuda/ptx.cuh), the trace's records, the kernels' parameters, and the host functions one
// file offers the others.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/ptx.cuh"

namespace spb {
namespace allscan_detail {

constexpr int kThreads = 512;
constexpr int kSlots = 64;              // flag slots per CTA and direction
constexpr size_t kMinSlice = 2048;      // fp32 elements per CTA and block before another CTA joins (8 KB)
constexpr int kMaxCtas = 128;
// Default CTA counts, from the sweeps on 4 x H200 (zeco/NOTES.md, "The device All-Scan"): device-flag 32; the packet
// protocols 128 CTAs of one unit per round (ll16 at P=4, 2 MiB 16.6 us against 24.5 at 32 CTAs x 8).
constexpr int kFlagCtas = 32, kPacketCtas = 128;
constexpr uint64_t kAbortBit = 1ull << 63;

enum ErrCode : int { kOk = 0, kTimeoutData = 1, kTimeoutCredit = 2, kAbortSeen = 3 };

// One per CTA in mapped pinned host memory: the first error the CTA met.
struct ErrorSlot {
  int code, peer, block, dir;
  unsigned epoch, pad;
  unsigned long long word;
};

// --- memory-model helpers (system scope: the peers are other GPUs) and the timer, from kernels/cuda/ptx.cuh -------
using ptx::fence_acq_rel_sys;
using ptx::globaltimer_ns;
using ptx::ld_acquire_sys;
using ptx::ld_relaxed_sys;
using ptx::ld_relaxed_sys_b128;  // packet protocol `ll16`: 16 bytes as one single-copy atomic access
using ptx::ld_relaxed_sys_v2;    // packet protocol `ll`: 16 bytes as two u64 words, each single-copy atomic
using ptx::st_relaxed_sys;
using ptx::st_relaxed_sys_b128;
using ptx::st_relaxed_sys_v2;
using ptx::st_release_sys;

// --- trace (SPB_ALLSCAN_TRACE; off by default) -----------------------------------------------------------------
// Each CTA of a traced call writes one record into a device ring of the last kTraceCalls calls (both directions):
// %globaltimer (ns, one clock per GPU, read by any SM) and %clock64 (cycles of the CTA's own SM) at five points:
//   entry      the CTA's first instruction (thread 0)
//   prologue   end of the prologue: abort word and credit read, the CTA's barriers passed (thread 0)
//   first_in   the first unit from the previous rank seen by the CTA: the earliest over its threads, each stamping
//              when its first unit carries the tag (packet protocols; device-flag: thread 0's first flag). It
//              is the moment a unit is *seen*, after the prologue's barrier: a unit that was already there reads
//              as the end of the prologue (give or take the few ns between warps leaving the barrier and thread
//              0 reading the clock). 0: no predecessor, or no unit for this CTA.
//   last_out   the latest over its threads of the moment a thread issued its last store (to the next rank, or on
//              the last rank to carry_out): issue, not arrival. 0: no unit for this CTA.
//   exit       after the ack to the previous rank (thread 0), just before the CTA returns
// The untraced kernels are separate instantiations (template flag kTrace): their code is unchanged by all this.
constexpr int kTraceCalls = 64;
enum TraceStamp : int { kStampEntry = 0, kStampPrologue, kStampFirstIn, kStampLastOut, kStampExit, kStamps };

struct TraceRec {
  unsigned long long gt[kStamps];   // %globaltimer, ns (0: no such event)
  unsigned long long clk[kStamps];  // %clock64 of the CTA's SM at the same points (0: none)
  unsigned call, epoch, dir, smid, units, elems;  // call: the object's call number over both directions, from 1
};

__device__ __forceinline__ unsigned long long clock64_u() { return static_cast<unsigned long long>(clock64()); }

// One call's kernel parameters (DeviceAllScanImpl::run fills them).
struct ScanParams {
  const float* decay;
  const float* local;
  const float* first;
  float* carry_in;
  float* carry_out;
  unsigned elems, cols, block_elems, slice;
  int blocks, slices, vec, ctas;  // `slices` pieces of `slice` elements per block
  char* self;       // my window
  char* prev_win;   // the rank I receive from in this direction (nullptr: I am first)
  char* next_win;   // the rank I send to (nullptr: I am last)
  char* win_minus;  // windows of ranks p-1 and p+1 (for the abort word)
  char* win_plus;
  size_t flags_off, acks_off, abort_off, data_off;  // this direction (and parity, for data)
  int dir, rank, prev, next;
  unsigned epoch;
  unsigned long long timeout_data_ns, timeout_credit_ns;  // grow with the distance to the chain's end they wait on
  ErrorSlot* err;  // device view of the mapped host slots, one per CTA
  // Trace (read by the kTrace instantiations only; last, so the fields above keep their parameter offsets).
  TraceRec* trace;      // this call's slot of the ring: one record per CTA
  unsigned trace_call;  // the object's call number over both directions, from 1
};

// --- what the files offer each other ----------------------------------------------------------------------------
// all_scan_device_protocols.cu: one call's kernel on `s` (the caller checks the launch). device-flag, and the packet
// protocols (kB128: device-ll16, else device-ll) at `unroll` units per thread and round (1, 2, 4 or 8).
void launch_flag(bool trace, int ctas, cudaStream_t s, const ScanParams& sp);
template <bool kB128>
void launch_packet(int unroll, bool trace, int ctas, cudaStream_t s, const ScanParams& sp);

// all_scan_device_trace.cu.
struct Calibration {
  double clk_ghz = 0;       // %clock64 cycles per %globaltimer ns over a 2 ms spin
  double gt_step_ns = 0;    // the globaltimer's mean step between changes (its resolution)
  double gt_min_step_ns = 0;
};
Calibration calibrate_clocks();
int next_trace_id();  // objects traced by this process, in creation order (the same on every rank)

// One object's trace, as write_trace needs it: the ring, what the meta file records, and the windows of the
// clock-offset ping-pong.
struct TraceDump {
  const TraceRec* ring;  // device: kTraceCalls x ctas records
  const char* prefix;    // SPB_ALLSCAN_TRACE
  const char* backend;   // the protocol, as --allscan names it
  int id;                // next_trace_id() at the object's creation
  int rank, ranks, ctas;
  int unroll;            // 0 for device-flag
  size_t capacity;       // elements
  unsigned calls;        // calls traced, both directions
  Calibration start;     // calibrate_clocks() at the object's creation
  char* self;            // my window, and those of ranks p-1 and p+1 (null: no such rank)
  char* prev;
  char* next;
  size_t clock_off;      // the ping-pong's three words in every window
  unsigned long long timeout_ns;
};
// At destruction (collective over neighbours): a second calibration, the clock offset to rank p-1, then
// <prefix>.rank<r>.csv (one row per CTA and call in the ring) and <prefix>.rank<r>.meta.csv (one row per object).
// Never throws.
void write_trace(const TraceDump& t, bool failed_here) noexcept;

}  // namespace allscan_detail
}  // namespace spb
