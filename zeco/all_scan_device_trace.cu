// The device-initiated All-Scan's trace: its clock kernels and its files (the stamps: all_scan_device_protocols.cu;
// the records: all_scan_device_common.cuh).
//
// Trace (SPB_ALLSCAN_TRACE=<prefix>, read on rank 0 and broadcast): the calls run traced instantiations of the
// kernels (template flag kTrace; the untraced ones are unchanged, so the knob costs nothing when unset), whose CTAs
// stamp %globaltimer and %clock64 at entry, end of prologue, first unit in, last unit out and exit into a device
// ring of the last 64 calls. At destruction every rank calibrates its clocks (clock64 rate, globaltimer step),
// estimates its globaltimer's offset to rank p-1's by a ping-pong over the windows, and writes
// <prefix>.rank<r>.csv and <prefix>.rank<r>.meta.csv (write_trace below; zeco/NOTES.md, "Where a device
// All-Scan call's time goes").
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <set>
#include <string>
#include <vector>

#include "runtime/cuda_check.h"
#include "runtime/error.h"
#include "zeco/all_scan_device_common.cuh"

namespace spb {
namespace {

using namespace allscan_detail;

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

struct ClockOffset {
  bool valid = false;
  double prev_minus_mine_ns = 0;  // globaltimer of rank p-1 minus mine, at the same instant (estimate)
  double rtt_ns = 0;              // mean round trip of the ping-pong
  long long rounds = 0;
};

// Files this process has written: the first object to write one truncates it, later ones append.
bool first_write(const std::string& path) {
  static std::set<std::string> seen;
  return seen.insert(path).second;
}

// Collective over neighbours (every rank runs it in its destructor): the estimate of rank p-1's globaltimer
// minus mine. A neighbour that does not come (it failed) only costs a timeout; the result is then invalid.
ClockOffset measure_clock_offset(const TraceDump& t) {
  char* prev = t.prev;
  char* next = t.next;
  long long* d = nullptr;
  long long h[4] = {};
  SPB_CUDA(cudaMalloc(&d, sizeof(h)));
  SPB_CUDA(cudaMemset(d, 0, sizeof(h)));
  const unsigned long long timeout = std::min(t.timeout_ns, 5'000'000'000ull);
  clock_offset_kernel<<<1, 64>>>(t.self, prev, next, t.clock_off, 100, 2000, timeout, d);
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

}  // namespace

namespace allscan_detail {

Calibration calibrate_clocks() {
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

int next_trace_id() {
  static int id = 0;
  return ++id;
}

void write_trace(const TraceDump& t, bool failed_here) noexcept {
  const int p = t.rank;
  try {
    const Calibration end = calibrate_clocks();
    const ClockOffset off = failed_here ? ClockOffset{} : measure_clock_offset(t);
    std::vector<TraceRec> recs(size_t(kTraceCalls) * size_t(t.ctas));
    SPB_CUDA(cudaMemcpy(recs.data(), t.ring, recs.size() * sizeof(TraceRec), cudaMemcpyDeviceToHost));
    std::vector<size_t> order;
    for (size_t i = 0; i < recs.size(); ++i)
      if (recs[i].epoch) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return recs[a].call != recs[b].call ? recs[a].call < recs[b].call : a < b;
    });
    const std::string base = std::string(t.prefix) + ".rank" + std::to_string(p);
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
      std::fprintf(f, "%d,%u,%u,%zu", p, r.epoch, r.dir, i % size_t(t.ctas));
      for (int k = 0; k < kStamps; ++k)
        r.gt[k] ? std::fprintf(f, ",%llu", r.gt[k]) : std::fputs(",", f);
      std::fprintf(f, ",%u,%d,%u,%u,%u", r.call, t.id, r.elems, r.units, r.smid);
      for (int k = 0; k < kStamps; ++k)
        r.clk[k] ? std::fprintf(f, ",%llu", r.clk[k]) : std::fputs(",", f);
      std::fputs("\n", f);
    }
    const bool ok = std::fclose(f) == 0;
    SPB_CHECK(ok, "writing " + path + " failed");
    FILE* m = open_rows(meta,
                        "scan_id,rank,ranks,proto,ctas,unroll,capacity,calls,gt_step_ns,gt_min_step_ns,"
                        "clk_ghz_start,clk_ghz_end,prev_offset_ns,prev_rtt_ns,prev_offset_rounds\n");
    std::fprintf(m, "%d,%d,%d,%s,%d,%d,%zu,%u,%.1f,%.1f,%.4f,%.4f,", t.id, p, t.ranks, t.backend, t.ctas,
                 t.unroll, t.capacity, t.calls, t.start.gt_step_ns, t.start.gt_min_step_ns, t.start.clk_ghz,
                 end.clk_ghz);
    if (off.valid) std::fprintf(m, "%.1f,%.1f,%lld\n", off.prev_minus_mine_ns, off.rtt_ns, off.rounds);
    else std::fputs(",,0\n", m);
    const bool meta_ok = std::fclose(m) == 0;
    SPB_CHECK(meta_ok, "writing " + meta + " failed");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] device All-Scan trace not written: %s\n", p, e.what());
  }
}

}  // namespace allscan_detail
}  // namespace spb
