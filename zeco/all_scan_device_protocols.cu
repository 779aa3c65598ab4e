// The kernels of the device-initiated All-Scan: protocol device-flag and the packet protocols device-ll and
// device-ll16 (below). zeco/all_scan_device.cu has the transport, the window layout and the host side.
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
#include <cuda_runtime.h>

#include <cstdint>

#include "zeco/all_scan_device_common.cuh"

namespace spb {
namespace {

using namespace allscan_detail;

// --- trace stamps (SPB_ALLSCAN_TRACE; the records: all_scan_device_common.cuh) ----------------------------------
// Gathers, per CTA, the stamps every thread contributes to: the earliest first arrival, the latest last store.
struct TraceShared {
  unsigned long long first_gt, first_clk, last_gt, last_clk;
};

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

}  // namespace

namespace allscan_detail {

void launch_flag(bool trace, int ctas, cudaStream_t s, const ScanParams& sp) {
  if (trace) all_scan_kernel<true><<<ctas, kThreads, 0, s>>>(sp);
  else all_scan_kernel<false><<<ctas, kThreads, 0, s>>>(sp);
}

template <bool kB128>
void launch_packet(int unroll, bool trace, int ctas, cudaStream_t s, const ScanParams& sp) {
  if (trace) launch_packet_unroll<kB128, true>(unroll, ctas, s, sp);
  else launch_packet_unroll<kB128, false>(unroll, ctas, s, sp);
}
template void launch_packet<false>(int, bool, int, cudaStream_t, const ScanParams&);
template void launch_packet<true>(int, bool, int, cudaStream_t, const ScanParams&);

}  // namespace allscan_detail
}  // namespace spb
