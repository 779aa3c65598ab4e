// The device-initiated All-Scan (DESIGN §3, backend `device`), and the link probes that calibrate it.
//
// Transport. Each rank owns one window of device memory that its neighbours can load from and store to:
//  - `nccl-lsa` (tried first): ncclMemAlloc + ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC) on the runtime's NCCL
//    communicator; the neighbours' addresses come from NCCL's device API (ncclGetPeerPointer on the window, read once
//    by a one-thread set-up kernel). Reachability = membership of NCCL's LSA team (ncclTeamLsa): ranks that NCCL can
//    map by load/store (NVLink or PCIe P2P, one node or one NVLink domain).
//  - `cuda-ipc` (where NCCL's symmetric memory cannot serve: NCCL then returns a null window, e.g. without cuMem or
//    when not every pair of ranks has direct P2P): cudaMalloc + cudaIpcGetMemHandle, handles exchanged through the
//    bootstrap, reachability = same host and cudaDeviceCanAccessPeer.
//  SPB_ALLSCAN_TRANSPORT=auto (default: nccl-lsa, else cuda-ipc), nccl (nccl-lsa or UsageError) or ipc.
//  Either way the kernel sees plain pointers: its own window and those of ranks p-1 and p+1. Unreachable neighbours
//  make creation throw UsageError naming the pairs, on every rank alike. No NVLink multicast is used.
//
// Window layout (identical on every rank, so an offset means the same thing in every window), per direction d:
//    flags[d][cta][kSlots]  u64  written by the rank before me in direction d: "unit i of call E is in your buffer"
//    acks[d][cta]           u64  written by the rank after me: "I have finished reading call E's buffer"
//    abort                  u64  0, or the first error of the chain (who gave up waiting for whom)
//    clock[3]               u64  the trace's clock-offset ping-pong (SPB_ALLSCAN_TRACE only, at destruction)
//    data[d][parity]        max_elems fp32 receive buffers, parity = call number & 1 (double buffering)
//
// Kernel (one launch per rank and call, `ctas` CTAs of kThreads threads). Rows decay independently, so the state is
// cut into units: block k (of the caller's K) is split into `slices` slices of at least kMinSlice elements, unit
// u = k * slices + j, and the units are dealt round-robin to the CTAs, the same way on every rank. A unit depends
// only on the same unit of the previous rank, so CTA c of every rank forms its own chain, CTAs never wait for each
// other, and a large K (small blocks) still keeps up to `ctas` units in flight. Call number E counts the calls of
// one direction (every rank makes the same calls, so E agrees).
//  1. Credit (writers only, E > 2): wait until acks[d][*] >= E-2 in my own window, i.e. the next rank has finished
//     reading the buffer of parity E&1 that I am about to overwrite (it was last filled by call E-2). The packet
//     protocols (below) wait for acks[d][c] of their own CTA c only: CTA c of the next rank is its only reader.
//  2. For its units in increasing order (unit i of CTA c): a reader's thread 0 spins (ld.acquire.sys) on
//     flags[d][c][i % kSlots] in its own window until it is >= (E << 32 | i+1); then the CTA reads the unit from the
//     receive buffer (ld.cg: L2, never a stale L1 line), writes carry_in, folds carry_out =
//     fmaf(expf(decay[row]), x, local) and, on a writer, stores the folded unit straight into the next rank's
//     receive buffer (16-byte stores over NVLink). Every thread then
//     fences (fence.acq_rel.sys), the CTA synchronises and thread 0 publishes the tag with st.release.sys on the next
//     rank's flag. The first rank in the direction starts from `first` (or zeros) and never waits.
//  3. Ack (readers): after its last read, thread 0 stores E (st.release.sys) into acks[d][c] of the previous rank.
//  Flags and acks only grow (E never repeats), so nothing is ever reset. Flag slots are reused modulo kSlots within a
//  call; that is safe because one CTA writes a slot in increasing order of i and a larger tag still means "unit i
//  is there" (its data was written before, and the buffer of unit i is not reused within the call).
//  Buffer reuse across back-to-back calls: data of call E lives in parity E&1; the writer of call E+2 waits for the
//  reader's ack of call E (step 1), so a buffer is never overwritten while being read, and the writer can be a
//  full call ahead of its reader without waiting at all.
//
// Timeouts. Every spin reads %globaltimer; after SPB_SPIN_TIMEOUT_S seconds (default 10; plus a tenth of that per
// rank between the waiter and the end of the chain it waits on, so the rank next to a missing one gives up
// first and the abort word reaches the others before their own deadline) the CTA stops, records
// (code, peer, block, call) in mapped pinned host memory, writes an abort word into its own window and both
// neighbours' windows, and returns. Spinning CTAs poll the abort word, so the whole chain stops within a moment
// instead of each rank timing out in turn, and a later call's kernel sees it at once. The host reports the error
// at the next run() or check() as spb::Error naming the rank that did not arrive (for a rank stopped by the abort
// word: which rank gave up waiting for which).
//
// Trace (SPB_ALLSCAN_TRACE=<prefix>, read on rank 0 and broadcast): the calls run traced instantiations of the
// kernels (template flag kTrace; the untraced ones are unchanged, so the knob costs nothing when unset), whose CTAs
// stamp %globaltimer and %clock64 at entry, end of prologue, first unit in, last unit out and exit into a device
// ring of the last 64 calls. At destruction every rank calibrates its clocks (clock64 rate, globaltimer step),
// estimates its globaltimer's offset to rank p-1's by a ping-pong over the windows, and writes
// <prefix>.rank<r>.csv and <prefix>.rank<r>.meta.csv (the trace section below; zeco/NOTES.md, "Where a device
// All-Scan call's time goes").
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/bootstrap.h"
#include "runtime/cuda_check.h"
#include "runtime/error.h"
#include "zeco/all_scan_device.h"

// An NCCL call that must return ncclSuccess (or, on a non-blocking communicator, ncclInProgress and then finish).
#define SPB_NCCL_WAIT(comm, call) ::spb::nccl_wait((comm), (call), #call, __FILE__, __LINE__)

namespace spb {
namespace {

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

double env_seconds(const char* name, double def) {
  const char* s = std::getenv(name);
  if (!s || !*s) return def;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  SPB_USAGE(end && *end == '\0' && v > 0, std::string(name) + "='" + s + "' is not a number of seconds > 0");
  return v;
}

double timeout_seconds() {  // as in the NCCL communicator
  const char* s = std::getenv("SPB_TIMEOUT_S");
  if (!s || !*s) return 120.0;
  const double v = std::strtod(s, nullptr);
  return v > 0 ? v : 0.0;
}

// A call on a possibly non-blocking NCCL communicator. There NCCL may finish a call in the background even when it
// returned ncclSuccess (a window handle, say, is filled in later), so the communicator's state is polled until it
// leaves ncclInProgress, with SPB_TIMEOUT_S; on a blocking communicator the first poll answers ncclSuccess.
void nccl_wait(ncclComm_t comm, ncclResult_t r, const char* call, const char* file, int line) {
  const auto t0 = std::chrono::steady_clock::now();
  const double limit = timeout_seconds();
  while (r == ncclSuccess || r == ncclInProgress) {
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) break;
    r = state;
    if (r != ncclInProgress) break;
    if (limit > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > limit)
      fail(file, line, std::string(call) + " did not complete within SPB_TIMEOUT_S: some rank did not arrive");
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  if (r != ncclSuccess)
    fail(file, line, std::string(call) + ": " + ncclGetErrorString(r) + " (" + ncclGetLastError(comm) + ")");
}

// --- memory-model helpers (system scope: the peers are other GPUs) ---------------------------------------------
__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t ld_relaxed_sys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void fence_acq_rel_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
// 16 bytes as two u64 words, each single-copy atomic on its own (packet protocol `ll`).
__device__ __forceinline__ ulonglong2 ld_relaxed_sys_v2(const ulonglong2* p) {
  ulonglong2 v;
  asm volatile("ld.relaxed.sys.global.v2.u64 {%0, %1}, [%2];" : "=l"(v.x), "=l"(v.y) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_relaxed_sys_v2(ulonglong2* p, ulonglong2 v) {
  asm volatile("st.relaxed.sys.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(v.x), "l"(v.y) : "memory");
}
// 16 bytes as one .b128 access (PTX ISA 8.3+, sm_70+): one single-copy atomic access (packet protocol `ll16`).
__device__ __forceinline__ ulonglong2 ld_relaxed_sys_b128(const ulonglong2* p) {
  ulonglong2 v;
  asm volatile("{ .reg .b128 t; ld.relaxed.sys.global.b128 t, [%2]; mov.b128 {%0, %1}, t; }"
               : "=l"(v.x), "=l"(v.y) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_relaxed_sys_b128(ulonglong2* p, ulonglong2 v) {
  asm volatile("{ .reg .b128 t; mov.b128 t, {%1, %2}; st.relaxed.sys.global.b128 [%0], t; }" ::"l"(p), "l"(v.x),
               "l"(v.y) : "memory");
}
__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

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

// Gathers, per CTA, the stamps every thread contributes to: the earliest first arrival, the latest last store.
struct TraceShared {
  unsigned long long first_gt, first_clk, last_gt, last_clk;
};

__device__ __forceinline__ unsigned long long clock64_u() { return static_cast<unsigned long long>(clock64()); }

__device__ __forceinline__ unsigned sm_id() {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

__device__ __forceinline__ void trace_stamp(unsigned long long (&gt)[kStamps], unsigned long long (&clk)[kStamps],
                                            int which) {
  clk[which] = clock64_u();
  gt[which] = globaltimer_ns();
}

// The CTA's TraceShared (a function-scope __shared__ is one per CTA; referenced by traced kernels only).
__device__ __forceinline__ TraceShared& trace_shared() {
  __shared__ TraceShared s;
  return s;
}

__device__ __forceinline__ void trace_shared_init(TraceShared& s) {
  s.first_gt = s.first_clk = ~0ull;
  s.last_gt = s.last_clk = 0;
}

__device__ __forceinline__ void trace_first_in(TraceShared& s) {
  const unsigned long long c = clock64_u(), g = globaltimer_ns();
  atomicMin(&s.first_gt, g);
  atomicMin(&s.first_clk, c);
}

__device__ __forceinline__ void trace_last_out(TraceShared& s) {
  const unsigned long long c = clock64_u(), g = globaltimer_ns();
  atomicMax(&s.last_gt, g);
  atomicMax(&s.last_clk, c);
}

// The clock calibration: one thread spins on %globaltimer for `window_ns` and reports the elapsed
// globaltimer and clock64, how often the globaltimer changed and its smallest step (its resolution).
__global__ void clock_calibrate_kernel(unsigned long long window_ns, unsigned long long* out) {
  const unsigned long long c0 = clock64_u(), g0 = globaltimer_ns();
  unsigned long long prev = g0, g = g0, changes = 0, min_step = ~0ull;
  while ((g = globaltimer_ns()) - g0 < window_ns) {
    if (g != prev) {
      ++changes;
      min_step = g - prev < min_step ? g - prev : min_step;
      prev = g;
    }
  }
  const unsigned long long c1 = clock64_u();
  out[0] = g - g0;
  out[1] = c1 - c0;
  out[2] = changes;
  out[3] = min_step;
  out[4] = prev - g0;  // from the start to the last change seen: mean step = out[4] / out[2]
}

// The offset between this rank's %globaltimer and the previous rank's (trace only; the GPUs' timers are not
// documented to agree). Lane 0 of warp 0 pings rank p-1 `rounds` times; p-1 (lane 0 of its warp 1) answers each
// ping with its own globaltimer; one round gives t1 (ping sent), t2 (p-1's timer), t4 (answer seen) and the
// estimate t2 - (t1 + t4) / 2, exact when both one-way trips take equally long. Warp 1 answers rank p+1 at the
// same time, so every pair runs at once. Words in each window at `off`: +0 ping (from p+1), +64 answer flag and
// +128 answer time (from p-1). out[0] = rounds averaged (0: none or timed out), out[1] = 2 x the first estimate,
// out[2] = the sum over rounds of (2 x estimate - out[1]), out[3] = the sum of round trips (ns).
__global__ void clock_offset_kernel(char* self, char* prev, char* next, size_t off, int warm, int rounds,
                                    unsigned long long timeout_ns, long long* out) {
  if (threadIdx.x % 32 != 0) return;
  const int warp = threadIdx.x / 32;
  const uint64_t start = globaltimer_ns();
  if (warp == 0 && prev) {
    const uint64_t* answered = reinterpret_cast<const uint64_t*>(self + off + 64);
    const uint64_t* answer_time = reinterpret_cast<const uint64_t*>(self + off + 128);
    uint64_t* ping = reinterpret_cast<uint64_t*>(prev + off);
    long long n = 0, first = 0, sum = 0, rtt = 0;
    for (int i = 1; i <= warm + rounds; ++i) {
      const uint64_t t1 = globaltimer_ns();
      st_relaxed_sys(ping, uint64_t(i));
      while (ld_acquire_sys(answered) < uint64_t(i))
        if (globaltimer_ns() - start > timeout_ns) {
          out[0] = 0;
          return;
        }
      const uint64_t t4 = globaltimer_ns();
      const uint64_t t2 = ld_relaxed_sys(answer_time);
      if (i <= warm) continue;
      const long long e2 = static_cast<long long>(2 * t2 - t1 - t4);  // 2 x estimate (modulo 2^64)
      if (n == 0) first = e2;
      sum += e2 - first;
      rtt += static_cast<long long>(t4 - t1);
      ++n;
    }
    out[0] = n;
    out[1] = first;
    out[2] = sum;
    out[3] = rtt;
  } else if (warp == 1 && next) {
    const uint64_t* ping = reinterpret_cast<const uint64_t*>(self + off);
    uint64_t* answered = reinterpret_cast<uint64_t*>(next + off + 64);
    uint64_t* answer_time = reinterpret_cast<uint64_t*>(next + off + 128);
    for (int i = 1; i <= warm + rounds; ++i) {
      while (ld_acquire_sys(ping) < uint64_t(i))
        if (globaltimer_ns() - start > timeout_ns) return;
      st_relaxed_sys(answer_time, globaltimer_ns());
      st_release_sys(answered, uint64_t(i));
    }
  }
}

// Spins until *addr >= target. Returns kOk, `timeout_code` after timeout_ns, or kAbortSeen (word in *seen) when the
// abort word becomes non-zero.
__device__ int spin_geq(const uint64_t* addr, uint64_t target, const uint64_t* abort_word, uint64_t timeout_ns,
                        int timeout_code, uint64_t* seen) {
  const uint64_t t0 = globaltimer_ns();
  for (unsigned it = 1;; ++it) {
    if (ld_acquire_sys(addr) >= target) return kOk;
    if ((it & 63u) == 0) {
      const uint64_t w = ld_relaxed_sys(abort_word);
      if (w) {
        *seen = w;
        return kAbortSeen;
      }
      if (globaltimer_ns() - t0 > timeout_ns) return timeout_code;
    }
  }
}

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

// Thread 0 of a traced CTA: the record of this call.
__device__ void trace_write(const ScanParams& p, const unsigned long long (&gt)[kStamps],
                            const unsigned long long (&clk)[kStamps], unsigned units) {
  TraceRec* r = p.trace + blockIdx.x;
#pragma unroll
  for (int i = 0; i < kStamps; ++i) r->gt[i] = gt[i], r->clk[i] = clk[i];
  r->call = p.trace_call;
  r->epoch = p.epoch;
  r->dir = unsigned(p.dir);
  r->smid = sm_id();
  r->units = units;
  r->elems = p.elems;
}

// Thread 0 of a traced packet CTA: the stamps gathered in shared memory (0 where no thread contributed).
__device__ __forceinline__ void trace_take_shared(const TraceShared& s, unsigned long long (&gt)[kStamps],
                                                  unsigned long long (&clk)[kStamps]) {
  gt[kStampFirstIn] = s.first_gt == ~0ull ? 0 : s.first_gt;
  clk[kStampFirstIn] = s.first_clk == ~0ull ? 0 : s.first_clk;
  gt[kStampLastOut] = s.last_gt;
  clk[kStampLastOut] = s.last_clk;
}

// One thread per CTA: remember the error for the host and stop the rest of the chain.
__device__ void raise_error(const ScanParams& p, int code, int peer, int block, uint64_t word) {
  if (code != kAbortSeen)
    word = kAbortBit | (uint64_t(code & 0xff) << 48) | (uint64_t(p.rank & 0xffffff) << 24) | uint64_t(peer & 0xffffff);
  st_relaxed_sys(reinterpret_cast<uint64_t*>(p.self + p.abort_off), word);
  if (p.win_minus) st_relaxed_sys(reinterpret_cast<uint64_t*>(p.win_minus + p.abort_off), word);
  if (p.win_plus) st_relaxed_sys(reinterpret_cast<uint64_t*>(p.win_plus + p.abort_off), word);
  volatile ErrorSlot* e = p.err + blockIdx.x;
  e->peer = peer;
  e->block = block;
  e->dir = p.dir;
  e->epoch = p.epoch;
  e->word = word;
  __threadfence_system();
  e->code = code;
  __threadfence_system();
}

__device__ __forceinline__ float decay_factor(const float* decay, unsigned e, unsigned cols) {
  return expf(decay[e / cols]);
}

// The fold of elements [base, base + n) of the state; x from the receive buffer (or `first`, or zero).
__device__ __forceinline__ void fold_slice(const ScanParams& p, unsigned base, unsigned n, const float* recv,
                                           float* send) {
  if (p.vec) {
    for (unsigned i = threadIdx.x * 4u; i < n; i += blockDim.x * 4u) {
      const unsigned e = base + i;
      float4 x;
      if (recv) x = __ldcg(reinterpret_cast<const float4*>(recv + e));
      else if (p.first) x = *reinterpret_cast<const float4*>(p.first + e);
      else x = make_float4(0.f, 0.f, 0.f, 0.f);
      const float4 y = *reinterpret_cast<const float4*>(p.local + e);
      const unsigned r0 = e / p.cols, r3 = (e + 3) / p.cols;
      float4 o;
      if (r0 == r3) {
        const float f = expf(p.decay[r0]);
        o = make_float4(fmaf(f, x.x, y.x), fmaf(f, x.y, y.y), fmaf(f, x.z, y.z), fmaf(f, x.w, y.w));
      } else {
        o = make_float4(fmaf(decay_factor(p.decay, e, p.cols), x.x, y.x),
                        fmaf(decay_factor(p.decay, e + 1, p.cols), x.y, y.y),
                        fmaf(decay_factor(p.decay, e + 2, p.cols), x.z, y.z),
                        fmaf(decay_factor(p.decay, e + 3, p.cols), x.w, y.w));
      }
      *reinterpret_cast<float4*>(p.carry_in + e) = x;
      *reinterpret_cast<float4*>(p.carry_out + e) = o;
      if (send) *reinterpret_cast<float4*>(send + e) = o;
    }
  } else {
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) {
      const unsigned e = base + i;
      const float x = recv ? __ldcg(recv + e) : (p.first ? p.first[e] : 0.f);
      const float o = fmaf(decay_factor(p.decay, e, p.cols), x, p.local[e]);
      p.carry_in[e] = x;
      p.carry_out[e] = o;
      if (send) send[e] = o;
    }
  }
}

// The CTA agrees on the shared status word: every thread reads it between two barriers, so no thread can see a
// later write to it before all have read this one (threads then leave together, or go on together).
__device__ __forceinline__ bool stop_requested(const int& s_code) {
  __syncthreads();
  const int code = *const_cast<const volatile int*>(&s_code);
  __syncthreads();
  return code != kOk;
}

// Steps 0 and 1 of every protocol: stop at once if an earlier call of the chain failed, then wait for the credit
// (the next rank has finished reading the buffer this call overwrites, filled by call E-2). Returns false, after
// recording the error, when the CTA must leave.
__device__ bool call_prologue(const ScanParams& p, int& s_code, int& s_peer, int& s_block, unsigned long long& s_word) {
  const int tid = threadIdx.x;
  const uint64_t* my_abort = reinterpret_cast<const uint64_t*>(p.self + p.abort_off);
  if (tid == 0) {
    s_code = kOk;
    const uint64_t w = ld_relaxed_sys(my_abort);
    if (w) s_code = kAbortSeen, s_peer = -1, s_block = -1, s_word = w;
  }
  if (stop_requested(s_code)) {
    if (tid == 0) raise_error(p, s_code, s_peer, s_block, s_word);
    return false;
  }
  if (p.next_win && p.epoch > 2) {
    if (tid < p.ctas) {
      uint64_t w = 0;
      const uint64_t* acks = reinterpret_cast<const uint64_t*>(p.self + p.acks_off);
      const int r = spin_geq(acks + tid, p.epoch - 2, my_abort, p.timeout_credit_ns, kTimeoutCredit, &w);
      if (r != kOk && atomicCAS(&s_code, kOk, r) == kOk) s_peer = p.next, s_block = -1, s_word = w;
    }
    if (stop_requested(s_code)) {
      if (tid == 0) raise_error(p, s_code, s_peer, s_block, s_word);
      return false;
    }
  }
  return true;
}

// Step 3: this CTA has read everything it will read from this call's receive buffer.
__device__ void call_epilogue_ack(const ScanParams& p) {
  __syncthreads();
  if (threadIdx.x == 0) st_release_sys(reinterpret_cast<uint64_t*>(p.prev_win + p.acks_off) + blockIdx.x, p.epoch);
}

// Protocol `flag`: the caller's K blocks, each cut into slices; per slice a fence and a release flag.
// kTrace: thread 0 stamps the trace points (first_in: its first flag seen; last_out: after its last flag release).
template <bool kTrace>
__global__ void __launch_bounds__(kThreads) all_scan_kernel(ScanParams p) {
  __shared__ int s_code, s_peer, s_block;
  __shared__ unsigned long long s_word;
  [[maybe_unused]] unsigned long long tr_gt[kStamps] = {}, tr_clk[kStamps] = {};
  if constexpr (kTrace)
    if (threadIdx.x == 0) trace_stamp(tr_gt, tr_clk, kStampEntry);
  const int tid = threadIdx.x, c = blockIdx.x;
  const uint64_t* my_abort = reinterpret_cast<const uint64_t*>(p.self + p.abort_off);
  if (!call_prologue(p, s_code, s_peer, s_block, s_word)) return;
  if constexpr (kTrace)
    if (tid == 0) trace_stamp(tr_gt, tr_clk, kStampPrologue);

  // 2. The units (block k, slice j), u = k * slices + j, dealt round-robin to the CTAs; each CTA takes its units in
  //    increasing u, hence in increasing k. Unit i of CTA c uses flag slot i % kSlots of CTA c, tag (E, i+1).
  const float* recv = p.prev_win ? reinterpret_cast<const float*>(p.self + p.data_off) : nullptr;
  float* send = p.next_win ? reinterpret_cast<float*>(p.next_win + p.data_off) : nullptr;
  const uint64_t* my_flags = reinterpret_cast<const uint64_t*>(p.self + p.flags_off) + size_t(c) * kSlots;
  uint64_t* next_flags = send ? reinterpret_cast<uint64_t*>(p.next_win + p.flags_off) + size_t(c) * kSlots : nullptr;
  const unsigned units = unsigned(p.blocks) * unsigned(p.slices);
  unsigned i = 0;
  for (unsigned u = unsigned(c); u < units; u += unsigned(p.ctas), ++i) {
    const unsigned k = u / unsigned(p.slices), j = u - k * unsigned(p.slices);
    const unsigned lo = j * p.slice, n = min(p.slice, p.block_elems - lo);
    const uint64_t tag = (uint64_t(p.epoch) << 32) | uint64_t(i + 1);
    if (recv) {
      if (tid == 0) {
        uint64_t w = 0;
        const int r = spin_geq(my_flags + (i % kSlots), tag, my_abort, p.timeout_data_ns, kTimeoutData, &w);
        if (r != kOk) s_code = r, s_peer = p.prev, s_block = int(k), s_word = w;
        if constexpr (kTrace)
          if (i == 0 && r == kOk) trace_stamp(tr_gt, tr_clk, kStampFirstIn);
      }
      if (stop_requested(s_code)) {  // every thread leaves together
        if (tid == 0) raise_error(p, s_code, s_peer, s_block, s_word);
        return;
      }
    }
    fold_slice(p, k * p.block_elems + lo, n, recv, send);
    if (send) fence_acq_rel_sys();  // this thread's stores to the peer are visible system-wide ...
    __syncthreads();                // ... for every thread of the CTA ...
    if (send && tid == 0) st_release_sys(next_flags + (i % kSlots), tag);  // ... before the flag
  }
  if constexpr (kTrace)
    if (tid == 0 && i > 0) trace_stamp(tr_gt, tr_clk, kStampLastOut);

  if (recv) call_epilogue_ack(p);
  if constexpr (kTrace)
    if (tid == 0) {
      trace_stamp(tr_gt, tr_clk, kStampExit);
      trace_write(p, tr_gt, tr_clk, i);
    }
}

// Protocols `ll` and `ll16` (NCCL's LL idea): the call's tag E travels inside every 16-byte unit of the receive
// buffer, in the same single-copy-atomic access as the values it vouches for, so a unit is usable the moment it
// lands: no fence, no flag, no wait for the rest of a block. `ll`: two u64 words of {value, E} (8-byte atomicity,
// half the bytes are payload); `ll16`: one .b128 word of {3 values, E} (16-byte atomicity of .b128 accesses,
// three quarters payload). A stale unit carries E-2 (double buffering) or 0 (a fresh window); E starts at 1, so
// neither is mistaken for this call's. The caller's K blocks play no part.
//
// Thread t of CTA c owns units u = c*kThreads + t + j*stride (stride = all threads of the grid), the same on every
// rank, so CTA c of one rank writes exactly what CTA c of the next rank reads (its credit is that CTA's ack alone),
// and the state crosses each hop in increasing j, a stride of units at a time. A thread takes its units in rounds
// of kUnroll (SPB_ALLSCAN_UNROLL): first it issues every load of the round that needs nothing from the predecessor
// (this rank's values and decays, `first` on the first rank) together with one look at each of the round's units
// in its receive buffer, so their latencies overlap; then, unit by unit, it waits for the unit (re-reading that one
// unit only), folds it and stores it to the next rank at once. A unit is therefore forwarded one poll after it
// lands, whatever the round size (forwarding a round only once all of it has arrived measured slower).
// The loads of round 0 are issued before the prologue (abort word, credit), which they do not depend on.
//
// Memory-model choices: the polls are ld.relaxed.sys (the tag and the values are one access, so no acquire is
// needed, and an acquire would stop the round's later loads from being issued before the first unit arrives);
// the stores are st.relaxed.sys (strong, so the access is single-copy atomic under the PTX model; a weak st.global
// is not promised to be). The next rank's store comes before this rank's carries, and no store precedes a load
// of the same round (a store may alias a later load, which would then wait for it).

template <bool kB128>
__device__ __forceinline__ bool unit_has_tag(ulonglong2 w, unsigned tag) {
  return kB128 ? unsigned(w.y >> 32) == tag : (unsigned(w.x >> 32) == tag && unsigned(w.y >> 32) == tag);
}

template <bool kB128>
__device__ __forceinline__ ulonglong2 load_unit(const ulonglong2* q) {
  return kB128 ? ld_relaxed_sys_b128(q) : ld_relaxed_sys_v2(q);
}

template <bool kB128>
__device__ __forceinline__ void store_unit(ulonglong2* q, ulonglong2 w) {
  if constexpr (kB128) st_relaxed_sys_b128(q, w);
  else st_relaxed_sys_v2(q, w);
}

template <bool kB128>
constexpr unsigned kValuesPerUnit = kB128 ? 3 : 2;

template <bool kB128>
__device__ __forceinline__ ulonglong2 pack_unit(const float (&v)[kValuesPerUnit<kB128>], unsigned tag) {
  const uint64_t hi = uint64_t(tag) << 32;
  if constexpr (kB128)
    return make_ulonglong2(uint64_t(__float_as_uint(v[0])) | (uint64_t(__float_as_uint(v[1])) << 32),
                           uint64_t(__float_as_uint(v[2])) | hi);
  else
    return make_ulonglong2(uint64_t(__float_as_uint(v[0])) | hi, uint64_t(__float_as_uint(v[1])) | hi);
}

template <bool kB128>
__device__ __forceinline__ void unpack_unit(ulonglong2 w, float (&v)[kValuesPerUnit<kB128>]) {
  v[0] = __uint_as_float(unsigned(w.x));
  if constexpr (kB128) {
    v[1] = __uint_as_float(unsigned(w.x >> 32));
    v[2] = __uint_as_float(unsigned(w.y));
  } else {
    v[1] = __uint_as_float(unsigned(w.y));
  }
}

// One round's loads that need nothing from the predecessor, all issued before any is used: this rank's values y and
// decay factors f for units base + j*stride, and w[j], the unit as it stands in the receive buffer (a first look;
// on the first rank, where nothing is received, the unit built from `first` or zeros, already carrying the tag).
template <bool kB128, int kUnroll>
__device__ __forceinline__ void load_round(const ScanParams& p, const ulonglong2* recv, unsigned base,
                                           unsigned stride, unsigned units, unsigned tag,
                                           float (&y)[kUnroll][kValuesPerUnit<kB128>],
                                           float (&f)[kUnroll][kValuesPerUnit<kB128>], ulonglong2 (&w)[kUnroll]) {
  constexpr unsigned V = kValuesPerUnit<kB128>;
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    const unsigned u = base + unsigned(j) * stride;
    float x[V];
#pragma unroll
    for (unsigned i = 0; i < V; ++i) {
      const unsigned e = u * V + i;  // u >= units implies e >= elems
      const bool in = e < p.elems;
      y[j][i] = in ? __ldg(p.local + e) : 0.f;
      f[j][i] = in ? __ldg(p.decay + e / p.cols) : 0.f;
      x[i] = !recv && in && p.first ? __ldg(p.first + e) : 0.f;
    }
    w[j] = recv ? (u < units ? load_unit<kB128>(recv + u) : make_ulonglong2(0, 0)) : pack_unit<kB128>(x, tag);
  }
  // The factors before any wait: off the path from a unit's arrival to its store.
#pragma unroll
  for (int j = 0; j < kUnroll; ++j)
#pragma unroll
    for (unsigned i = 0; i < V; ++i) f[j][i] = expf(f[j][i]);
}

// Re-reads unit u until it carries the tag. Returns false when the CTA must stop: another thread gave up (s_code),
// the abort word is set, or the wait exceeded the timeout (recorded in the shared slots by the first thread).
template <bool kB128>
__device__ __forceinline__ bool wait_unit(const ScanParams& p, const ulonglong2* q, unsigned u, unsigned tag,
                                          ulonglong2& w, int& s_code, int& s_peer, int& s_block,
                                          unsigned long long& s_word) {
  const volatile int* code = &s_code;
  const uint64_t* my_abort = reinterpret_cast<const uint64_t*>(p.self + p.abort_off);
  uint64_t t0 = 0;
  for (unsigned it = 1;; ++it) {
    w = load_unit<kB128>(q);
    if (unit_has_tag<kB128>(w, tag)) return true;
    if ((it & 255u) == 0) {  // now and then: has anyone given up, or have I waited too long?
      if (*code != kOk) return false;
      const uint64_t a = ld_relaxed_sys(my_abort), now = globaltimer_ns();
      if (!t0) t0 = now;
      const int why = a ? kAbortSeen : now - t0 > p.timeout_data_ns ? kTimeoutData : kOk;
      if (why != kOk) {
        if (atomicCAS(&s_code, kOk, why) == kOk)
          s_peer = p.prev, s_block = int(u * kValuesPerUnit<kB128> / p.block_elems), s_word = a;
        return false;
      }
    }
  }
}

// Steps 0 and 1 for the packet protocols: thread 0 reads the abort word and this CTA's own credit (the ack of CTA c
// of the next rank, the only reader of what CTA c writes) with both loads in flight at once, and spins on the
// credit only if it is not there yet.
__device__ bool packet_prologue(const ScanParams& p, int& s_code, int& s_peer, int& s_block,
                                unsigned long long& s_word) {
  if (threadIdx.x == 0) {
    s_code = kOk;
    const uint64_t* my_abort = reinterpret_cast<const uint64_t*>(p.self + p.abort_off);
    const uint64_t* ack = reinterpret_cast<const uint64_t*>(p.self + p.acks_off) + blockIdx.x;
    const bool credit = p.next_win && p.epoch > 2;
    const uint64_t w = ld_relaxed_sys(my_abort);
    const uint64_t a = credit ? ld_acquire_sys(ack) : 0;
    if (w) {
      s_code = kAbortSeen, s_peer = -1, s_block = -1, s_word = w;
    } else if (credit && a < p.epoch - 2) {
      uint64_t seen = 0;
      const int r = spin_geq(ack, p.epoch - 2, my_abort, p.timeout_credit_ns, kTimeoutCredit, &seen);
      if (r != kOk) s_code = r, s_peer = p.next, s_block = -1, s_word = seen;
    }
  }
  if (stop_requested(s_code)) {
    if (threadIdx.x == 0) raise_error(p, s_code, s_peer, s_block, s_word);
    return false;
  }
  return true;
}

// kTrace: the trace stamps (above); the untraced instantiations (kTrace = false) carry no trace code at all.
template <bool kB128, int kUnroll, bool kTrace>
__global__ void __launch_bounds__(kThreads) all_scan_packet_kernel(ScanParams p) {
  __shared__ int s_code, s_peer, s_block;
  __shared__ unsigned long long s_word;
  [[maybe_unused]] unsigned long long tr_gt[kStamps] = {}, tr_clk[kStamps] = {};  // thread 0's stamps
  if constexpr (kTrace)
    if (threadIdx.x == 0) {
      trace_stamp(tr_gt, tr_clk, kStampEntry);
      trace_shared_init(trace_shared());  // used by the other threads only after the prologue's barriers
    }
  constexpr unsigned V = kValuesPerUnit<kB128>;
  const unsigned units = (p.elems + V - 1) / V, stride = gridDim.x * blockDim.x, tag = p.epoch;
  const ulonglong2* recv = p.prev_win ? reinterpret_cast<const ulonglong2*>(p.self + p.data_off) : nullptr;
  ulonglong2* send = p.next_win ? reinterpret_cast<ulonglong2*>(p.next_win + p.data_off) : nullptr;
  const unsigned u0 = blockIdx.x * blockDim.x + threadIdx.x;

  float y[kUnroll][V], f[kUnroll][V];
  ulonglong2 w[kUnroll];
  load_round<kB128, kUnroll>(p, recv, u0, stride, units, tag, y, f, w);  // in flight during the prologue
  if (!packet_prologue(p, s_code, s_peer, s_block, s_word)) return;
  if constexpr (kTrace)
    if (threadIdx.x == 0) trace_stamp(tr_gt, tr_clk, kStampPrologue);

  bool ok = true;
  for (unsigned base = u0; ok && base < units; base += unsigned(kUnroll) * stride) {
    if (base != u0) load_round<kB128, kUnroll>(p, recv, base, stride, units, tag, y, f, w);
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const unsigned u = base + unsigned(j) * stride;
      if (u >= units) break;
      if (!unit_has_tag<kB128>(w[j], tag) &&
          !wait_unit<kB128>(p, recv + u, u, tag, w[j], s_code, s_peer, s_block, s_word)) {
        ok = false;
        break;
      }
      if constexpr (kTrace)
        if (recv && j == 0 && base == u0) trace_first_in(trace_shared());  // this thread's first unit
      float x[V], o[V];
      unpack_unit<kB128>(w[j], x);
#pragma unroll
      for (unsigned i = 0; i < V; ++i) o[i] = fmaf(f[j][i], x[i], y[j][i]);
      if (send) store_unit<kB128>(send + u, pack_unit<kB128>(o, tag));  // the next rank is waiting for it
#pragma unroll
      for (unsigned i = 0; i < V; ++i) {
        const unsigned e = u * V + i;
        if (e < p.elems) p.carry_in[e] = x[i], p.carry_out[e] = o[i];
      }
    }
  }
  if constexpr (kTrace)
    if (ok && u0 < units) trace_last_out(trace_shared());  // this thread's last store is issued
  __syncthreads();
  if (s_code != kOk) {
    if (threadIdx.x == 0) raise_error(p, s_code, s_peer, s_block, s_word);
    return;
  }
  if (recv) call_epilogue_ack(p);
  if constexpr (kTrace)
    if (threadIdx.x == 0) {
      trace_stamp(tr_gt, tr_clk, kStampExit);
      trace_take_shared(trace_shared(), tr_gt, tr_clk);  // complete: every thread passed the barrier above
      unsigned n = 0;  // units of this CTA: threads c*kThreads + t, t < kThreads, in every stride
      for (unsigned b = blockIdx.x * blockDim.x; b < units; b += stride) n += min(units - b, blockDim.x);
      trace_write(p, tr_gt, tr_clk, n);
    }
}

// --- windows -------------------------------------------------------------------------------------------------------
struct PeerList {
  int n = 0;
  int peer[4] = {-1, -1, -1, -1};
};

__global__ void lsa_pointers_kernel(ncclWindow_t win, PeerList peers, char** out) {
  for (int i = 0; i < peers.n; ++i) out[i] = static_cast<char*>(ncclGetPeerPointer(win, 0, peers.peer[i]));
}

// Every rank lists the neighbours it cannot reach; all ranks learn the full list and throw the same UsageError.
void agree_reachable(Bootstrap& boot, const std::vector<int>& bad, const std::string& why) {
  int mine[4] = {-1, -1, -1, -1};
  for (size_t i = 0; i < bad.size() && i < 4; ++i) mine[i] = bad[i];
  std::vector<char> all = boot.gather(mine, sizeof(mine));
  all.resize(sizeof(mine) * size_t(boot.size()));
  boot.broadcast(all.data(), all.size(), 0);
  const int* v = reinterpret_cast<const int*>(all.data());
  std::set<std::pair<int, int>> pairs;
  for (int r = 0; r < boot.size(); ++r)
    for (int i = 0; i < 4; ++i)
      if (v[4 * r + i] >= 0) pairs.insert({std::min(r, v[4 * r + i]), std::max(r, v[4 * r + i])});
  std::string list;
  for (const auto& pr : pairs)
    list += (list.empty() ? "" : ", ") + std::to_string(pr.first) + " and " + std::to_string(pr.second);
  SPB_USAGE(pairs.empty(), "device All-Scan: ranks " + list + " cannot load/store each other's GPU memory (" + why +
                               "); use the host-driven All-Scan backend (nccl) for this placement");
}

enum class Transport { automatic = 0, nccl = 1, ipc = 2 };

// A window of `bytes` on every rank, mapped to the ranks in `wanted` (collective; `wanted` may differ per rank).
// Transport::automatic tries NCCL's symmetric memory and falls back to CUDA IPC where NCCL cannot provide it.
class PeerWindow {
 public:
  PeerWindow(Runtime& rt, size_t bytes, const std::vector<int>& wanted, Transport t)
      : boot_(rt.boot), bytes_(bytes), peers_(size_t(rt.world()), nullptr) {
    SPB_USAGE(rt.comm && rt.comm->name() == "nccl" && rt.comm->native_handle(),
              "the device All-Scan needs the gpu runtime (an NCCL communicator)");
    SPB_CHECK(wanted.size() <= 4, "at most 4 peers per window");
    comm_ = static_cast<ncclComm_t>(rt.comm->native_handle());
    if (t == Transport::ipc || !try_nccl(rt, wanted, t == Transport::nccl)) open_ipc(rt, wanted);
    boot_.barrier();  // every window is zeroed before anyone writes into it
  }

 private:
  // NCCL symmetric window + LSA pointers. Returns false (on every rank alike) where NCCL offers no symmetric memory
  // and `required` is false; throws UsageError for neighbours outside the LSA team.
  bool try_nccl(Runtime& rt, const std::vector<int>& wanted, bool required) {
    const int me = rt.rank();
    const ncclTeam_t lsa = ncclTeamLsa(comm_);
    const std::string why_not =
        "NCCL offers no symmetric memory on this communicator (it needs cuMem, NCCL_CUMEM_ENABLE, and direct P2P "
        "between all ranks of one node; NCCL_DEBUG=INFO says more)";
    if (!boot_.all(lsa.nRanks > 0)) {
      SPB_USAGE(!required, "device All-Scan, SPB_ALLSCAN_TRANSPORT=nccl: " + why_not);
      return false;
    }
    std::vector<int> bad;
    for (int q : wanted)
      if (q - (me - lsa.rank) < 0 || q - (me - lsa.rank) >= lsa.nRanks) bad.push_back(q);
    agree_reachable(boot_, bad, "not in one NCCL LSA team: no NVLink/P2P path between them");
    SPB_NCCL_WAIT(comm_, ncclMemAlloc(reinterpret_cast<void**>(&local_), bytes_));
    SPB_CUDA(cudaMemset(local_, 0, bytes_));
    SPB_CUDA(cudaDeviceSynchronize());
    // Collective. Where the communicator has no symmetric support, NCCL returns success and a null window.
    SPB_NCCL_WAIT(comm_, ncclCommWindowRegister(comm_, local_, bytes_, &win_, NCCL_WIN_COLL_SYMMETRIC));
    if (!boot_.all(win_ != nullptr)) {
      SPB_CHECK(win_ == nullptr, "NCCL registered a symmetric window on some ranks only");
      ncclMemFree(local_);
      local_ = nullptr;
      SPB_USAGE(!required, "device All-Scan, SPB_ALLSCAN_TRANSPORT=nccl: " + why_not);
      return false;
    }
    transport_ = "nccl-lsa";
    PeerList pl;
    for (int q : wanted) pl.peer[pl.n++] = q;
    if (pl.n) {
      char** d_out = nullptr;
      SPB_CUDA(cudaMalloc(&d_out, sizeof(char*) * 4));
      lsa_pointers_kernel<<<1, 1>>>(win_, pl, d_out);
      SPB_CUDA_LAUNCH();
      char* out[4] = {};
      SPB_CUDA(cudaMemcpy(out, d_out, sizeof(char*) * 4, cudaMemcpyDeviceToHost));
      SPB_CUDA(cudaFree(d_out));
      for (int i = 0; i < pl.n; ++i) peers_[size_t(pl.peer[i])] = out[i];
    }
    return true;
  }

  // cudaMalloc + CUDA IPC handles, exchanged through the bootstrap.
  void open_ipc(Runtime& rt, const std::vector<int>& wanted) {
    transport_ = "cuda-ipc";
    struct Card {
      char host[64];
      char bus[32];
      cudaIpcMemHandle_t handle;
    };
    SPB_CUDA(cudaMalloc(reinterpret_cast<void**>(&local_), bytes_));
    SPB_CUDA(cudaMemset(local_, 0, bytes_));
    SPB_CUDA(cudaDeviceSynchronize());
    Card card;
    std::memset(&card, 0, sizeof(card));
    gethostname(card.host, sizeof(card.host) - 1);
    int dev = 0;
    SPB_CUDA(cudaGetDevice(&dev));
    SPB_CUDA(cudaDeviceGetPCIBusId(card.bus, sizeof(card.bus), dev));
    SPB_CUDA(cudaIpcGetMemHandle(&card.handle, local_));
    std::vector<char> all = boot_.gather(&card, sizeof(card));
    all.resize(sizeof(card) * size_t(rt.world()));
    boot_.broadcast(all.data(), all.size(), 0);
    const Card* cards = reinterpret_cast<const Card*>(all.data());
    std::vector<int> bad;
    for (int q : wanted) {
      bool ok = std::strncmp(cards[q].host, card.host, sizeof(card.host)) == 0;
      int qdev = -1;
      if (ok && cudaDeviceGetByPCIBusId(&qdev, cards[q].bus) == cudaSuccess) {
        int can = 0;
        ok = qdev != dev && cudaDeviceCanAccessPeer(&can, dev, qdev) == cudaSuccess && can;
      }
      cudaGetLastError();
      if (!ok) bad.push_back(q);
    }
    agree_reachable(boot_, bad, "on different hosts, or cudaDeviceCanAccessPeer says no");
    for (int q : wanted) {
      void* p = nullptr;
      SPB_CUDA(cudaIpcOpenMemHandle(&p, cards[q].handle, cudaIpcMemLazyEnablePeerAccess));
      peers_[size_t(q)] = static_cast<char*>(p);
    }
  }

 public:
  ~PeerWindow() {
    // Collective: nobody may still be writing into a window that is about to go away. A broken window (a peer
    // gave up, or is gone) is leaked instead: its peers may never arrive at the barriers.
    cudaDeviceSynchronize();
    if (broken_) return;
    boot_.barrier();
    if (transport_ == "nccl-lsa") {
      if (win_) nccl_wait(comm_, ncclCommWindowDeregister(comm_, win_), "ncclCommWindowDeregister", __FILE__, __LINE__);
      if (local_) ncclMemFree(local_);
    } else {
      for (char* p : peers_)
        if (p) cudaIpcCloseMemHandle(p);
      boot_.barrier();  // every importer has closed its mapping of my memory
      if (local_) cudaFree(local_);
    }
  }

  char* local() const { return local_; }
  char* peer(int r) const { return r >= 0 && size_t(r) < peers_.size() ? peers_[size_t(r)] : nullptr; }
  const std::string& transport() const { return transport_; }
  void set_broken() { broken_ = true; }

 private:
  Bootstrap& boot_;
  size_t bytes_;
  std::vector<char*> peers_;
  ncclComm_t comm_ = nullptr;
  ncclWindow_t win_ = nullptr;
  char* local_ = nullptr;
  std::string transport_;
  bool broken_ = false;
};

// Settings every rank must share: read on rank 0, broadcast.
struct Settings {
  Transport transport = Transport::automatic;
  int ctas = 0;    // 0: the protocol's default (kFlagCtas, kPacketCtas)
  int unroll = 1;  // packet protocols: units per thread and round (1, 2, 4 or 8)
  double spin_timeout_s = 10;
  char trace_prefix[256] = {};  // SPB_ALLSCAN_TRACE: "" = no trace
};

// Rank 0 reads the environment; a bad value becomes the same UsageError on every rank (not a throw on rank 0 alone,
// which would leave the others waiting in the broadcast).
Settings agreed_settings(Bootstrap& boot) {
  Settings s;
  char error[256] = {};
  if (boot.rank() == 0) {
    try {
      if (const char* t = std::getenv("SPB_ALLSCAN_TRANSPORT"); t && *t) {
        const std::string v = t;
        SPB_USAGE(v == "auto" || v == "nccl" || v == "ipc",
                  "SPB_ALLSCAN_TRANSPORT='" + v + "': use auto, nccl or ipc");
        s.transport = v == "nccl" ? Transport::nccl : v == "ipc" ? Transport::ipc : Transport::automatic;
      }
      if (const char* c = std::getenv("SPB_ALLSCAN_CTAS"); c && *c) {
        s.ctas = std::atoi(c);
        SPB_USAGE(s.ctas >= 1 && s.ctas <= kMaxCtas,
                  std::string("SPB_ALLSCAN_CTAS='") + c + "': use 1.." + std::to_string(kMaxCtas));
      }
      if (const char* c = std::getenv("SPB_ALLSCAN_UNROLL"); c && *c) {
        s.unroll = std::atoi(c);
        SPB_USAGE(s.unroll == 1 || s.unroll == 2 || s.unroll == 4 || s.unroll == 8,
                  std::string("SPB_ALLSCAN_UNROLL='") + c + "': use 1, 2, 4 or 8");
      }
      s.spin_timeout_s = env_seconds("SPB_SPIN_TIMEOUT_S", 10.0);
      if (const char* t = std::getenv("SPB_ALLSCAN_TRACE"); t && *t) {
        const std::string v = t;
        SPB_USAGE(v.size() < sizeof(s.trace_prefix),
                  "SPB_ALLSCAN_TRACE: a path prefix of at most " + std::to_string(sizeof(s.trace_prefix) - 1) +
                      " characters");
        const size_t slash = v.rfind('/');
        const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : v.substr(0, slash);
        SPB_USAGE(access(dir.c_str(), W_OK) == 0,
                  "SPB_ALLSCAN_TRACE='" + v + "': the folder '" + dir + "' does not exist or is not writable");
        std::memcpy(s.trace_prefix, v.c_str(), v.size() + 1);
      }
    } catch (const UsageError& e) {
      std::strncpy(error, e.what(), sizeof(error) - 1);
    }
  }
  boot.broadcast(&s, sizeof(s), 0);
  boot.broadcast(error, sizeof(error), 0);
  SPB_USAGE(error[0] == '\0', std::string(error));
  return s;
}

size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// The packet kernel for a units-per-round count chosen at run time (SPB_ALLSCAN_UNROLL; agreed on every rank).
template <bool kB128, bool kTrace>
void launch_packet_unroll(int unroll, int ctas, cudaStream_t s, const ScanParams& sp) {
  switch (unroll) {
    case 1: all_scan_packet_kernel<kB128, 1, kTrace><<<ctas, kThreads, 0, s>>>(sp); break;
    case 2: all_scan_packet_kernel<kB128, 2, kTrace><<<ctas, kThreads, 0, s>>>(sp); break;
    case 4: all_scan_packet_kernel<kB128, 4, kTrace><<<ctas, kThreads, 0, s>>>(sp); break;
    default: all_scan_packet_kernel<kB128, 8, kTrace><<<ctas, kThreads, 0, s>>>(sp); break;
  }
}

template <bool kB128>
void launch_packet(int unroll, bool trace, int ctas, cudaStream_t s, const ScanParams& sp) {
  if (trace) launch_packet_unroll<kB128, true>(unroll, ctas, s, sp);
  else launch_packet_unroll<kB128, false>(unroll, ctas, s, sp);
}

class DeviceAllScanImpl final : public DeviceAllScan {
 public:
  DeviceAllScanImpl(Runtime& rt, size_t max_elems, const std::string& backend, int ctas)
      : rt_(rt), max_elems_(max_elems), backend_(backend) {
    SPB_USAGE(backend == "device-flag" || backend == "device-ll" || backend == "device-ll16",
              "device All-Scan: '" + backend + "' is not a device protocol (device-flag, device-ll, device-ll16)");
    proto_ = backend == "device-flag" ? kFlag : backend == "device-ll" ? kLL : kLL16;
    SPB_USAGE(max_elems >= 1 && max_elems <= (size_t(1) << 31),
              "device All-Scan: capacity of " + std::to_string(max_elems) + " elements (use 1 .. 2^31)");
    const Settings s = agreed_settings(rt.boot);
    SPB_USAGE(ctas >= 0 && ctas <= kMaxCtas, "device All-Scan: " + std::to_string(ctas) + " CTAs (use 0 .. " +
                                                  std::to_string(kMaxCtas) + ")");
    ctas_ = s.ctas ? s.ctas : ctas ? ctas : proto_ == kFlag ? kFlagCtas : kPacketCtas;
    unroll_ = s.unroll;
    timeout_ns_ = static_cast<unsigned long long>(s.spin_timeout_s * 1e9);
    // Layout (module comment).
    const size_t flag_bytes = size_t(ctas_) * kSlots * 8;
    flags_off_[0] = 0;
    flags_off_[1] = flag_bytes;
    acks_off_[0] = round_up(2 * flag_bytes, 128);
    acks_off_[1] = acks_off_[0] + round_up(size_t(ctas_) * 8, 128);
    abort_off_ = acks_off_[1] + round_up(size_t(ctas_) * 8, 128);
    clock_off_ = abort_off_ + 128;  // three words, 64 bytes apart (the trace's clock-offset ping-pong)
    const size_t ctrl = round_up(clock_off_ + 192, 4096);
    // Receive buffer bytes per element: 4 (flag), 8 ({value, tag} words), 16/3 ({3 values, tag} words).
    const size_t per_unit = proto_ == kLL ? 2 : 3;
    data_bytes_ = round_up(proto_ == kFlag ? max_elems * 4 : (max_elems + per_unit - 1) / per_unit * 16, 4096);
    for (int d = 0; d < 2; ++d)
      for (int par = 0; par < 2; ++par) data_off_[d][par] = ctrl + size_t(d * 2 + par) * data_bytes_;
    const size_t total = ctrl + 4 * data_bytes_;

    const int p = rt.rank(), P = rt.world();
    std::vector<int> wanted;
    if (p > 0) wanted.push_back(p - 1);
    if (p + 1 < P) wanted.push_back(p + 1);
    win_ = std::make_unique<PeerWindow>(rt, total, wanted, s.transport);

    SPB_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&err_host_), sizeof(ErrorSlot) * ctas_, cudaHostAllocMapped));
    std::memset(err_host_, 0, sizeof(ErrorSlot) * ctas_);
    SPB_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&err_dev_), err_host_, 0));

    if (s.trace_prefix[0]) {  // SPB_ALLSCAN_TRACE: the ring of the last kTraceCalls calls, and a first calibration
      trace_prefix_ = s.trace_prefix;
      trace_id_ = next_trace_id();
      const size_t bytes = sizeof(TraceRec) * size_t(kTraceCalls) * size_t(ctas_);
      SPB_CUDA(cudaMalloc(reinterpret_cast<void**>(&trace_dev_), bytes));
      SPB_CUDA(cudaMemset(trace_dev_, 0, bytes));
      calib_start_ = calibrate_clocks();
    }
  }

  ~DeviceAllScanImpl() override {
    cudaDeviceSynchronize();
    const bool bad = failed();
    if (trace_dev_) {
      write_trace(bad);  // before the window goes: the clock-offset ping-pong uses it
      cudaFree(trace_dev_);
    }
    if (bad) win_->set_broken();  // a peer may be gone: skip the collective parts of the teardown
    win_.reset();
    if (err_host_) cudaFreeHost(err_host_);
  }

  std::string transport() const override { return win_->transport(); }
  std::string backend() const override { return backend_; }

  void run(const AllScanArgs& a, Stream st) override {
    validate_blocks(a.rows, a.blocks);
    SPB_USAGE(a.rows * a.cols <= max_elems_, "device All-Scan: a state of " + std::to_string(a.rows) + " x " +
                                                 std::to_string(a.cols) + " exceeds the capacity of " +
                                                 std::to_string(max_elems_) + " elements given at creation");
    throw_if_failed();
    if (a.rows * a.cols == 0) return;
    SPB_CHECK(a.decay && a.local && a.carry_in && a.carry_out, "device All-Scan: a null buffer");
    const bool fwd = a.direction == ScanDirection::forward;
    const int d = fwd ? 0 : 1;
    const unsigned epoch = ++epoch_[d];
    const int p = rt_.rank(), P = rt_.world();
    const int prev = fwd ? p - 1 : p + 1, next = fwd ? p + 1 : p - 1;

    ScanParams sp{};
    sp.decay = a.decay;
    sp.local = a.local;
    sp.first = a.first;
    sp.carry_in = a.carry_in;
    sp.carry_out = a.carry_out;
    sp.elems = unsigned(a.rows * a.cols);
    sp.cols = unsigned(a.cols);
    sp.blocks = a.blocks;
    sp.block_elems = unsigned(a.rows / size_t(a.blocks) * a.cols);
    auto aligned = [](const void* q) { return q == nullptr || reinterpret_cast<uintptr_t>(q) % 16 == 0; };
    sp.vec = sp.block_elems % 4 == 0 && aligned(a.local) && aligned(a.first) && aligned(a.carry_in) &&
             aligned(a.carry_out);
    // The same split on every rank: a block is cut into slices of at least kMinSlice elements (at most one per CTA).
    int g = int(std::min<size_t>(size_t(ctas_), (sp.block_elems + kMinSlice - 1) / kMinSlice));
    g = std::max(g, 1);
    size_t slice = (sp.block_elems + size_t(g) - 1) / size_t(g);
    if (sp.vec) slice = round_up(slice, 4);
    sp.slice = unsigned(slice);
    sp.slices = int((sp.block_elems + slice - 1) / slice);
    sp.ctas = ctas_;
    sp.self = win_->local();
    sp.prev_win = prev >= 0 && prev < P ? win_->peer(prev) : nullptr;
    sp.next_win = next >= 0 && next < P ? win_->peer(next) : nullptr;
    SPB_CHECK((prev < 0 || prev >= P || sp.prev_win) && (next < 0 || next >= P || sp.next_win),
              "device All-Scan: a neighbour's window is not mapped");
    sp.win_minus = win_->peer(p - 1);
    sp.win_plus = win_->peer(p + 1);
    sp.flags_off = flags_off_[d];
    sp.acks_off = acks_off_[d];
    sp.abort_off = abort_off_;
    sp.data_off = data_off_[d][epoch & 1];
    sp.dir = d;
    sp.rank = p;
    sp.prev = prev;
    sp.next = next;
    sp.epoch = epoch;
    // A rank further from the rank it waits on gives up a little later (by a tenth of the timeout per hop), so the
    // rank next to a missing one times out first and its abort word stops the others: every message then names
    // the rank that did not arrive, not a neighbour that was waiting too.
    const unsigned long long hop = std::max(timeout_ns_ / 10, 20'000'000ull);
    const int up = fwd ? p : P - 1 - p, down = P - 1 - up;
    sp.timeout_data_ns = timeout_ns_ + (unsigned long long)(up) * hop;
    sp.timeout_credit_ns = timeout_ns_ + (unsigned long long)(down) * hop;
    sp.err = err_dev_;
    cudaStream_t s = static_cast<cudaStream_t>(st.handle ? st.handle : rt_.dev->compute_stream().handle);
    const bool trace = trace_dev_ != nullptr;
    if (trace) {
      sp.trace = trace_dev_ + size_t(trace_calls_ % kTraceCalls) * size_t(ctas_);
      sp.trace_call = ++trace_calls_;
    }
    if (proto_ == kFlag) {
      if (trace) all_scan_kernel<true><<<ctas_, kThreads, 0, s>>>(sp);
      else all_scan_kernel<false><<<ctas_, kThreads, 0, s>>>(sp);
    } else if (proto_ == kLL) {
      launch_packet<false>(unroll_, trace, ctas_, s, sp);
    } else {
      launch_packet<true>(unroll_, trace, ctas_, s, sp);
    }
    SPB_CUDA_LAUNCH();
  }

  void check(Stream st) override {
    cudaStream_t s = static_cast<cudaStream_t>(st.handle ? st.handle : rt_.dev->compute_stream().handle);
    SPB_CUDA(cudaStreamSynchronize(s));
    throw_if_failed(/*look_at_window=*/true);
  }

 private:
  // The abort word of my window: set by a neighbour that gave up, even while no kernel of mine was running.
  unsigned long long window_abort_word() const {
    unsigned long long w = 0;
    if (cudaMemcpy(&w, win_->local() + abort_off_, sizeof(w), cudaMemcpyDeviceToHost) != cudaSuccess) return 0;
    return w;
  }

  bool failed() const {
    for (int c = 0; c < ctas_; ++c)
      if (reinterpret_cast<volatile ErrorSlot*>(err_host_)[c].code != kOk) return true;
    return window_abort_word() != 0;
  }

  // Reports the first error as spb::Error: from this rank's kernels (mapped host slots, free to read at every
  // run()), and with look_at_window also from the abort word a neighbour left in my window (a device read).
  void throw_if_failed(bool look_at_window = false) {
    const volatile ErrorSlot* e = err_host_;
    int pick = -1;
    for (int c = 0; c < ctas_; ++c) {
      if (e[c].code == kOk) continue;
      if (pick < 0 || (e[pick].code == kAbortSeen && e[c].code != kAbortSeen)) pick = c;
    }
    if (pick < 0) {
      const unsigned long long w = look_at_window ? window_abort_word() : 0;
      if (w) fail(__FILE__, __LINE__, abort_message(w, "(abort word left in this rank's window)"));
      return;
    }
    const volatile ErrorSlot& x = e[pick];
    const std::string dir = x.dir == 0 ? "forward" : "reverse";
    const std::string call = "(" + dir + ", call " + std::to_string(x.epoch) + " of that direction)";
    const std::string secs = std::to_string(double(timeout_ns_) * 1e-9) + " s (SPB_SPIN_TIMEOUT_S)";
    const int me = rt_.rank();
    std::string msg;
    if (x.code == kTimeoutData) {
      msg = "device All-Scan " + call + ": rank " + std::to_string(me) + " waited more than " + secs + " for block " +
            std::to_string(x.block) + " from rank " + std::to_string(x.peer) + "; rank " + std::to_string(x.peer) +
            " did not arrive (dead, hung, or not making the same All-Scan calls)";
    } else if (x.code == kTimeoutCredit) {
      msg = "device All-Scan " + call + ": rank " + std::to_string(me) + " waited more than " + secs + " for rank " +
            std::to_string(x.peer) + " to finish reading its receive buffer; rank " + std::to_string(x.peer) +
            " did not arrive (dead, hung, or not making the same All-Scan calls)";
    } else {
      msg = abort_message(x.word, call);
    }
    fail(__FILE__, __LINE__, msg);
  }

  std::string abort_message(unsigned long long w, const std::string& call) const {
    const int code = int((w >> 48) & 0xff), origin = int((w >> 24) & 0xffffff), waited = int(w & 0xffffff);
    return "device All-Scan " + call + ": rank " + std::to_string(rt_.rank()) + " stopped because rank " +
           std::to_string(origin) + " gave up waiting for rank " + std::to_string(waited) +
           (code == kTimeoutCredit ? " (to free a receive buffer)" : " (for a block)") + "; rank " +
           std::to_string(waited) + " did not arrive";
  }

  // --- trace (SPB_ALLSCAN_TRACE) ----------------------------------------------------------------------------
  struct Calibration {
    double clk_ghz = 0;       // %clock64 cycles per %globaltimer ns over a 2 ms spin
    double gt_step_ns = 0;    // the globaltimer's mean step between changes (its resolution)
    double gt_min_step_ns = 0;
  };
  struct ClockOffset {
    bool valid = false;
    double prev_minus_mine_ns = 0;  // globaltimer of rank p-1 minus mine, at the same instant (estimate)
    double rtt_ns = 0;              // mean round trip of the ping-pong
    long long rounds = 0;
  };

  static int next_trace_id() {  // objects traced by this process, in creation order (the same on every rank)
    static int id = 0;
    return ++id;
  }
  // Files this process has written: the first object to write one truncates it, later ones append.
  static bool first_write(const std::string& path) {
    static std::set<std::string> seen;
    return seen.insert(path).second;
  }

  static Calibration calibrate_clocks() {
    unsigned long long* d = nullptr;
    unsigned long long h[5] = {};
    SPB_CUDA(cudaMalloc(&d, sizeof(h)));
    clock_calibrate_kernel<<<1, 1>>>(2'000'000ull, d);
    SPB_CUDA_LAUNCH();
    SPB_CUDA(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
    SPB_CUDA(cudaFree(d));
    Calibration c;
    c.clk_ghz = h[0] ? double(h[1]) / double(h[0]) : 0;
    c.gt_step_ns = h[2] ? double(h[4]) / double(h[2]) : 0;
    c.gt_min_step_ns = h[2] ? double(h[3]) : 0;
    return c;
  }

  // Collective over neighbours (every rank runs it in its destructor): the estimate of rank p-1's globaltimer
  // minus mine. A neighbour that does not come (it failed) only costs a timeout; the result is then invalid.
  ClockOffset measure_clock_offset() {
    const int p = rt_.rank();
    char* prev = win_->peer(p - 1);
    char* next = win_->peer(p + 1);
    long long* d = nullptr;
    long long h[4] = {};
    SPB_CUDA(cudaMalloc(&d, sizeof(h)));
    SPB_CUDA(cudaMemset(d, 0, sizeof(h)));
    const unsigned long long timeout = std::min(timeout_ns_, 5'000'000'000ull);
    clock_offset_kernel<<<1, 64>>>(win_->local(), prev, next, clock_off_, 100, 2000, timeout, d);
    SPB_CUDA_LAUNCH();
    SPB_CUDA(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
    SPB_CUDA(cudaFree(d));
    ClockOffset o;
    if (prev && h[0] > 0) {
      o.valid = true;
      o.rounds = h[0];
      o.prev_minus_mine_ns = (double(h[1]) + double(h[2]) / double(h[0])) / 2.0;
      o.rtt_ns = double(h[3]) / double(h[0]);
    }
    return o;
  }

  // At destruction: a second calibration, the clock offset to rank p-1, then <prefix>.rank<r>.csv (one row per
  // CTA and call in the ring) and <prefix>.rank<r>.meta.csv (one row per object). Never throws.
  void write_trace(bool failed_here) noexcept {
    const int p = rt_.rank();
    try {
      const Calibration end = calibrate_clocks();
      const ClockOffset off = failed_here ? ClockOffset{} : measure_clock_offset();
      std::vector<TraceRec> recs(size_t(kTraceCalls) * size_t(ctas_));
      SPB_CUDA(cudaMemcpy(recs.data(), trace_dev_, recs.size() * sizeof(TraceRec), cudaMemcpyDeviceToHost));
      std::vector<size_t> order;
      for (size_t i = 0; i < recs.size(); ++i)
        if (recs[i].epoch) order.push_back(i);
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return recs[a].call != recs[b].call ? recs[a].call < recs[b].call : a < b;
      });
      const std::string base = trace_prefix_ + ".rank" + std::to_string(p);
      const std::string path = base + ".csv", meta = base + ".meta.csv";
      // Truncated with a header by this process's first writer, appended to by the later ones.
      auto open_rows = [&](const std::string& file, const char* header) {
        const bool fresh = first_write(file);
        FILE* h = std::fopen(file.c_str(), fresh ? "w" : "a");
        SPB_CHECK(h, "cannot open " + file);
        if (fresh) std::fputs(header, h);
        return h;
      };
      FILE* f = open_rows(path,
                          "rank,epoch,dir,cta,entry_ns,prologue_ns,first_in_ns,last_out_ns,exit_ns,call,scan_id,elems,"
                          "units,smid,entry_clk,prologue_clk,first_in_clk,last_out_clk,exit_clk\n");
      for (size_t i : order) {
        const TraceRec& r = recs[i];
        std::fprintf(f, "%d,%u,%u,%zu", p, r.epoch, r.dir, i % size_t(ctas_));
        for (int k = 0; k < kStamps; ++k)
          r.gt[k] ? std::fprintf(f, ",%llu", r.gt[k]) : std::fputs(",", f);
        std::fprintf(f, ",%u,%d,%u,%u,%u", r.call, trace_id_, r.elems, r.units, r.smid);
        for (int k = 0; k < kStamps; ++k)
          r.clk[k] ? std::fprintf(f, ",%llu", r.clk[k]) : std::fputs(",", f);
        std::fputs("\n", f);
      }
      const bool ok = std::fclose(f) == 0;
      SPB_CHECK(ok, "writing " + path + " failed");
      FILE* m = open_rows(meta,
                          "scan_id,rank,ranks,proto,ctas,unroll,capacity,calls,gt_step_ns,gt_min_step_ns,"
                          "clk_ghz_start,clk_ghz_end,prev_offset_ns,prev_rtt_ns,prev_offset_rounds\n");
      std::fprintf(m, "%d,%d,%d,%s,%d,%d,%zu,%u,%.1f,%.1f,%.4f,%.4f,", trace_id_, p, rt_.world(), backend_.c_str(),
                   ctas_, proto_ == kFlag ? 0 : unroll_, max_elems_, trace_calls_, calib_start_.gt_step_ns,
                   calib_start_.gt_min_step_ns, calib_start_.clk_ghz, end.clk_ghz);
      if (off.valid) std::fprintf(m, "%.1f,%.1f,%lld\n", off.prev_minus_mine_ns, off.rtt_ns, off.rounds);
      else std::fputs(",,0\n", m);
      const bool meta_ok = std::fclose(m) == 0;
      SPB_CHECK(meta_ok, "writing " + meta + " failed");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[rank %d] device All-Scan trace not written: %s\n", p, e.what());
    }
  }

  enum Protocol { kFlag, kLL, kLL16 };
  Runtime& rt_;
  size_t max_elems_;
  std::string backend_;
  Protocol proto_ = kLL16;
  int ctas_ = kFlagCtas, unroll_ = 1;
  unsigned long long timeout_ns_ = 10'000'000'000ull;
  size_t flags_off_[2] = {}, acks_off_[2] = {}, abort_off_ = 0, clock_off_ = 0, data_off_[2][2] = {}, data_bytes_ = 0;
  unsigned epoch_[2] = {0, 0};
  std::unique_ptr<PeerWindow> win_;
  ErrorSlot* err_host_ = nullptr;
  ErrorSlot* err_dev_ = nullptr;
  TraceRec* trace_dev_ = nullptr;  // the ring (SPB_ALLSCAN_TRACE), or null: no trace, untraced kernels
  std::string trace_prefix_;
  unsigned trace_calls_ = 0;
  int trace_id_ = 0;
  Calibration calib_start_;
};

// --- probes --------------------------------------------------------------------------------------------------------
constexpr size_t kPingOff = 0, kPongOff = 128;

__global__ void pingpong_kernel(char* self, char* peer, int initiator, int warm, int iters,
                                unsigned long long timeout_ns, unsigned long long* out_ns) {
  const uint64_t* ping = reinterpret_cast<const uint64_t*>(self + kPingOff);
  const uint64_t* pong = reinterpret_cast<const uint64_t*>(self + kPongOff);
  uint64_t* peer_ping = reinterpret_cast<uint64_t*>(peer + kPingOff);
  uint64_t* peer_pong = reinterpret_cast<uint64_t*>(peer + kPongOff);
  uint64_t t0 = 0, start = globaltimer_ns();
  for (int i = 1; i <= warm + iters; ++i) {
    if (initiator && i == warm + 1) t0 = globaltimer_ns();
    if (initiator) st_release_sys(peer_ping, uint64_t(i));
    const uint64_t* wait_on = initiator ? pong : ping;
    while (ld_acquire_sys(wait_on) < uint64_t(i))
      if (globaltimer_ns() - start > timeout_ns) {
        *out_ns = ~0ull;
        return;
      }
    if (!initiator) st_release_sys(peer_pong, uint64_t(i));
  }
  if (initiator) *out_ns = globaltimer_ns() - t0;
}

__global__ void push_kernel(const float4* src, float4* dst, size_t n4) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n4; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
  fence_acq_rel_sys();
}

void check_pair(Runtime& rt, int a, int b) {
  SPB_USAGE(a >= 0 && b >= 0 && a < rt.world() && b < rt.world() && a != b,
            "link probe: ranks " + std::to_string(a) + " and " + std::to_string(b) + " in a world of " +
                std::to_string(rt.world()));
}

std::vector<int> pair_peers(Runtime& rt, int a, int b) {
  if (rt.rank() == a) return {b};
  if (rt.rank() == b) return {a};
  return {};
}

}  // namespace

std::unique_ptr<DeviceAllScan> make_device_all_scan(Runtime& rt, size_t max_elems, const std::string& backend,
                                                    int ctas) {
  return std::make_unique<DeviceAllScanImpl>(rt, max_elems, resolve_allscan(backend, true), ctas);
}

double probe_flag_latency_us(Runtime& rt, int a, int b, int iters) {
  check_pair(rt, a, b);
  SPB_USAGE(iters >= 1, "link probe: iters >= 1");
  const Settings s = agreed_settings(rt.boot);
  double us = 0;
  {
    PeerWindow win(rt, 4096, pair_peers(rt, a, b), s.transport);
    const int me = rt.rank();
    unsigned long long* d_ns = nullptr;
    SPB_CUDA(cudaMalloc(&d_ns, sizeof(*d_ns)));
    rt.boot.barrier();
    if (me == a || me == b) {
      pingpong_kernel<<<1, 1>>>(win.local(), win.peer(me == a ? b : a), me == a, 200, iters,
                                static_cast<unsigned long long>(s.spin_timeout_s * 1e9), d_ns);
      SPB_CUDA_LAUNCH();
      SPB_CUDA(cudaDeviceSynchronize());
    }
    unsigned long long ns = 0;
    if (me == a) SPB_CUDA(cudaMemcpy(&ns, d_ns, sizeof(ns), cudaMemcpyDeviceToHost));
    SPB_CUDA(cudaFree(d_ns));
    if (me == a) us = ns == ~0ull ? -1.0 : double(ns) / (2.0 * iters) / 1000.0;
    rt.boot.broadcast(&us, sizeof(us), a);
  }
  SPB_CHECK(us >= 0, "link probe: the flag ping-pong between ranks " + std::to_string(a) + " and " +
                         std::to_string(b) + " timed out");
  return us;
}

double probe_pair_bandwidth_gbs(Runtime& rt, int a, int b, size_t bytes, int ctas, int reps) {
  check_pair(rt, a, b);
  SPB_USAGE(bytes >= 16 && bytes % 16 == 0 && reps >= 1, "link probe: bytes a positive multiple of 16, reps >= 1");
  const Settings s = agreed_settings(rt.boot);
  double gbs = 0;
  {
    PeerWindow win(rt, bytes, pair_peers(rt, a, b), s.transport);
    const int me = rt.rank();
    if (me == a) {
      int dev = 0, sms = 0;
      SPB_CUDA(cudaGetDevice(&dev));
      SPB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
      const int grid = ctas > 0 ? ctas : sms;
      float4* src = nullptr;
      SPB_CUDA(cudaMalloc(&src, bytes));
      SPB_CUDA(cudaMemset(src, 1, bytes));
      float4* dst = reinterpret_cast<float4*>(win.peer(b));
      cudaStream_t st;
      SPB_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
      cudaEvent_t e0, e1;
      SPB_CUDA(cudaEventCreate(&e0));
      SPB_CUDA(cudaEventCreate(&e1));
      for (int w = 0; w < 3; ++w) push_kernel<<<grid, 1024, 0, st>>>(src, dst, bytes / 16);
      SPB_CUDA_LAUNCH();
      std::vector<double> rates;
      for (int r = 0; r < reps; ++r) {
        SPB_CUDA(cudaEventRecord(e0, st));
        push_kernel<<<grid, 1024, 0, st>>>(src, dst, bytes / 16);
        SPB_CUDA(cudaEventRecord(e1, st));
        SPB_CUDA(cudaEventSynchronize(e1));
        float ms = 0;
        SPB_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        rates.push_back(double(bytes) / (double(ms) * 1e-3) / 1e9);
      }
      std::sort(rates.begin(), rates.end());
      gbs = rates[rates.size() / 2];
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      cudaStreamDestroy(st);
      cudaFree(src);
    }
    rt.boot.broadcast(&gbs, sizeof(gbs), a);
  }
  return gbs;
}

}  // namespace spb
