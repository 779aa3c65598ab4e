// All-Scan on GPUs: the host-driven backend over NCCL (all_scan_host with an NCCL runtime) and the device-initiated
// backend (make_device_all_scan), against the sequential fold computed on the host. Run under mpirun with one GPU
// per rank (local rank = GPU ordinal), e.g. `mpirun -np 4 test_all_scan_gpu`; skips itself when the node has fewer
// GPUs than ranks on it.
//
// Tolerance. The host reference folds in fp32 with the same operation order, r = fma(exp(decay), r, local), so the
// only differences are exp (CUDA's expf is within 2 ulp, glibc's within 1) and the rounding of each fma on either
// side. Per hop that is at most 6u*e|r| + 2u|r'| <= 8u*A with u = 2^-24 and A the same fold over absolute values
// (every |exp| <= 1, so nothing grows); after h hops 8u*h*A. Each element is held to that bound with h = the number
// of folds behind it (at most P): 4.8e-7 relative per hop, i.e. 1e-6 for P = 2 and 1.9e-6 for P = 4. A wrong block,
// a stale buffer or a missed element is off by O(A) and fails by five orders of magnitude. One case with decay 0 and
// small integers (exp(0) = 1 and every sum exact) must match bit for bit.
#include "../mpi_test_main.h"
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "runtime/bootstrap.h"
#include "runtime/communicator.h"
#include "runtime/csv.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "sp/runtime.h"
#include "kernels/gla/gla_kernels.h"
#include "zeco/all_scan.h"
#include "kernels/gla/cuda/gla_cuda.h"
#include "zeco/all_scan_device.h"

namespace spb {
namespace {

Bootstrap* g_boot = nullptr;
std::unique_ptr<Runtime> g_rt;          // null when the node lacks GPUs (every test skips)
// The device backends, one object per protocol, created once; empty when unavailable (why: g_device_unavailable).
const std::vector<std::string> kProtocols = {"device-flag", "device-ll", "device-ll16"};
std::map<std::string, std::unique_ptr<DeviceAllScan>> g_scans;
std::string g_device_unavailable;
DeviceAllScan* scan_for(const std::string& backend) {
  auto it = g_scans.find(backend);
  return it == g_scans.end() ? nullptr : it->second.get();
}
constexpr size_t kCapacity = 4096 * 128;


#define SKIP_IF_NO_GPU() \
  if (!g_rt) GTEST_SKIP() << "fewer GPUs than ranks on this node, or no GPU"

// --- data and reference ----------------------------------------------------------------------------------------
struct CallData {  // every rank's inputs of one call (each rank generates all, from the same seed)
  std::vector<std::vector<float>> decay, local;
  std::vector<float> first;  // empty: nullptr
};

CallData make_data(unsigned seed, int P, size_t rows, size_t cols, bool with_first, bool exact) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dec(-3.f, 0.f), val(-1.f, 1.f);
  std::uniform_int_distribution<int> small(-8, 8), pick(0, 15);
  CallData d;
  d.decay.resize(P);
  d.local.resize(P);
  for (int q = 0; q < P; ++q) {
    d.decay[q].resize(rows);
    for (auto& x : d.decay[q]) {
      const int r = pick(gen);
      x = exact ? 0.f : r == 0 ? 0.f : r == 1 ? -40.f : dec(gen);  // include exp = 1 and exp ~ 4e-18
    }
    d.local[q].resize(rows * cols);
    for (auto& x : d.local[q]) x = exact ? float(small(gen)) : val(gen);
  }
  if (with_first) {
    d.first.resize(rows * cols);
    for (auto& x : d.first) x = exact ? float(small(gen)) : val(gen);
  }
  return d;
}

struct Expected {
  std::vector<float> in, out;          // the sequential fold
  std::vector<double> mag_in, mag_out;  // the fold over absolute values (the tolerance's scale)
  int hops_in = 0;
};

Expected reference(const CallData& d, int p, int P, ScanDirection dir, size_t rows, size_t cols) {
  const size_t n = rows * cols;
  Expected e;
  e.in.assign(n, 0.f);
  e.mag_in.assign(n, 0.0);
  if (!d.first.empty())
    for (size_t i = 0; i < n; ++i) e.in[i] = d.first[i], e.mag_in[i] = std::fabs(d.first[i]);
  auto fold = [&](int q, const std::vector<float>& x, const std::vector<double>& mx, std::vector<float>& o,
                  std::vector<double>& mo) {
    o.resize(n);
    mo.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const float f = std::exp(d.decay[q][i / cols]);
      o[i] = std::fma(f, x[i], d.local[q][i]);
      mo[i] = double(f) * mx[i] + std::fabs(d.local[q][i]);
    }
  };
  const bool fwd = dir == ScanDirection::forward;
  for (int q = fwd ? 0 : P - 1; q != p; q += fwd ? 1 : -1) {
    std::vector<float> o;
    std::vector<double> mo;
    fold(q, e.in, e.mag_in, o, mo);
    e.in.swap(o);
    e.mag_in.swap(mo);
    ++e.hops_in;
  }
  fold(p, e.in, e.mag_in, e.out, e.mag_out);
  return e;
}

// Counts elements outside the bound (`slack` times the chain's); prints the first few with the rank.
int count_bad(const char* what, const std::vector<float>& got, const std::vector<float>& want,
              const std::vector<double>& mag, int hops, bool exact, int slack = 1) {
  const double u = std::ldexp(1.0, -24), tol = 8 * u * std::max(hops, 1) * slack;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - double(want[i]));
    const bool ok = exact ? got[i] == want[i] : (std::isfinite(got[i]) && err <= tol * mag[i] + 1e-30);
    if (!ok && bad++ < 4)
      std::fprintf(stderr, "[rank %d] %s[%zu] = %.9g, expected %.9g (|err| %.3g, bound %.3g)\n", g_boot->rank(), what,
                   i, got[i], want[i], err, tol * mag[i]);
  }
  return bad;
}

// --- one batch of back-to-back calls ---------------------------------------------------------------------------
struct Call {
  ScanDirection dir;
  size_t rows, cols;
  int K;
  bool with_first, exact;
  unsigned seed;
};

struct CallBuffers {
  Buffer decay, local, first, cin, cout;
};

// Enqueues every call on the compute stream with no host synchronisation in between (so a later call's writes
// race an earlier call's reads if the buffer reuse is wrong), then checks every rank's carry_in and carry_out.
// `scan`: the device object to run, or nullptr for the host backend (`host`'s variant, else the chain); `label`
// names it in messages; `slack` widens the bound (count_bad).
void run_batch_on(DeviceAllScan* scan, const std::string& label, const std::vector<Call>& calls,
                  AllScan* host = nullptr, int slack = 1) {
  const bool device = scan != nullptr;
  Runtime& rt = *g_rt;
  Device& dev = *rt.dev;
  const int p = rt.rank(), P = rt.world();
  std::vector<CallBuffers> bufs(calls.size());
  std::vector<CallData> data;
  for (size_t c = 0; c < calls.size(); ++c) {
    const Call& k = calls[c];
    const size_t n = k.rows * k.cols;
    data.push_back(make_data(k.seed, P, k.rows, k.cols, k.with_first, k.exact));
    const CallData& d = data.back();
    CallBuffers& b = bufs[c];
    b.decay = Buffer(dev, k.rows * 4);
    b.local = Buffer(dev, n * 4);
    b.cin = Buffer(dev, n * 4);
    b.cout = Buffer(dev, n * 4);
    dev.upload(b.decay.get(), d.decay[p].data(), k.rows * 4);
    dev.upload(b.local.get(), d.local[p].data(), n * 4);
    if (k.with_first) {
      b.first = Buffer(dev, n * 4);
      dev.upload(b.first.get(), d.first.data(), n * 4);
    }
    const std::vector<float> nan(n, std::numeric_limits<float>::quiet_NaN());  // poison: every element is written
    dev.upload(b.cin.get(), nan.data(), n * 4);
    dev.upload(b.cout.get(), nan.data(), n * 4);
  }
  g_boot->barrier();
  const Stream st = dev.compute_stream();
  for (size_t c = 0; c < calls.size(); ++c) {
    const Call& k = calls[c];
    AllScanArgs a;
    a.direction = k.dir;
    a.rows = k.rows;
    a.cols = k.cols;
    a.blocks = k.K;
    a.transition = bufs[c].decay.f32();
    a.local = bufs[c].local.f32();
    a.first = k.with_first ? bufs[c].first.f32() : nullptr;
    a.carry_in = bufs[c].cin.f32();
    a.carry_out = bufs[c].cout.f32();
    if (device) scan->run(a, st);
    else if (host) host->run(a, st);
    else all_scan_host(rt, a, st);
  }
  if (device) scan->check(st);
  else if (host) host->check(st);
  dev.synchronize();
  for (size_t c = 0; c < calls.size(); ++c) {
    const Call& k = calls[c];
    const size_t n = k.rows * k.cols;
    const Expected e = reference(data[c], p, P, k.dir, k.rows, k.cols);
    std::vector<float> in(n), out(n);
    dev.download(in.data(), bufs[c].cin.get(), n * 4);
    dev.download(out.data(), bufs[c].cout.get(), n * 4);
    const std::string tag = label + " call " + std::to_string(c) +
                            (k.dir == ScanDirection::forward ? " fwd" : " rev") + " K=" + std::to_string(k.K) + " " +
                            std::to_string(k.rows) + "x" + std::to_string(k.cols);
    EXPECT_EQ(count_bad((tag + " carry_in").c_str(), in, e.in, e.mag_in, e.hops_in, k.exact, slack), 0)
        << "rank " << p << ": " << tag << " carry_in";
    EXPECT_EQ(count_bad((tag + " carry_out").c_str(), out, e.out, e.mag_out, e.hops_in + 1, k.exact, slack), 0)
        << "rank " << p << ": " << tag << " carry_out";
  }
}

void run_batch(const std::string& backend, const std::vector<Call>& calls) {
  DeviceAllScan* scan = scan_for(backend);
  ASSERT_TRUE(backend == "host" || scan) << backend;
  run_batch_on(scan, backend, calls);
}

// Environment variables set for the lifetime of the object and restored by its destructor, also when what runs in
// between throws (a leaked bad value would fail every later test of the binary).
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::vector<std::pair<std::string, std::string>>& env) {
    for (const auto& [name, value] : env) {
      const char* old = std::getenv(name.c_str());
      saved_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
      setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, old] : saved_)
      if (old) setenv(name.c_str(), old->c_str(), 1);
      else unsetenv(name.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// A device All-Scan made while the given environment variables are set (on every rank; rank 0's values count).
// Collective.
std::unique_ptr<DeviceAllScan> make_scan_with_env(const std::string& backend, size_t capacity,
                                                  const std::vector<std::pair<std::string, std::string>>& env) {
  ScopedEnv scoped(env);
  return make_device_all_scan(*g_rt, capacity, backend);
}

// --- the parametrised contract test ----------------------------------------------------------------------------
struct Param {
  std::string backend;
  ScanDirection dir;
  size_t rows, cols;
  int K;  // 0: K = rows
};

// A backend name as a gtest name: device-ll16 -> device_ll16.
std::string test_name(std::string backend) {
  std::replace(backend.begin(), backend.end(), '-', '_');
  return backend;
}

std::string param_name(const testing::TestParamInfo<Param>& info) {
  const Param& p = info.param;
  return test_name(p.backend) + (p.dir == ScanDirection::forward ? "_fwd_" : "_rev_") +
         std::to_string(p.rows) + "x" + std::to_string(p.cols) + "_K" + (p.K ? std::to_string(p.K) : "rows");
}

class AllScanGpu : public testing::TestWithParam<Param> {};

TEST_P(AllScanGpu, EveryRankGetsTheSequentialFold) {
  SKIP_IF_NO_GPU();
  const Param& prm = GetParam();
  if (prm.backend != "host" && !scan_for(prm.backend))
    GTEST_SKIP() << "device backend unavailable: " << g_device_unavailable;
  const int K = prm.K ? prm.K : int(prm.rows);
  // Three back-to-back calls with different data, with and without `first`.
  std::vector<Call> calls;
  for (unsigned i = 0; i < 3; ++i)
    calls.push_back({prm.dir, prm.rows, prm.cols, K, i != 1, false, 1000u * unsigned(K) + 17u * i + unsigned(prm.cols)});
  run_batch(prm.backend, calls);
}

// 256 x 64: 16384 elements, not a multiple of 3 (a partial ll16 word); 96 x 37: rows not a power of two; 7 x 37:
// an odd count (a partial ll word) smaller than one CTA's share.
std::vector<Param> all_params() {
  std::vector<Param> v;
  std::vector<std::string> backends = {"host"};
  backends.insert(backends.end(), kProtocols.begin(), kProtocols.end());
  for (const std::string& b : backends)
    for (ScanDirection dir : {ScanDirection::forward, ScanDirection::reverse})
      for (auto shape : {std::pair<size_t, size_t>{256, 64}, {96, 37}, {7, 37}})
        for (int K : {1, 2, 16, 0})
          if (K == 0 || shape.first % size_t(K) == 0) v.push_back({b, dir, shape.first, shape.second, K});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Gpu, AllScanGpu, testing::ValuesIn(all_params()), param_name);

TEST(AllScanGpuMixed, AlternatingDirectionsShapesAndBlocksBackToBack) {
  SKIP_IF_NO_GPU();
  std::vector<std::string> backends = {"host"};
  for (const auto& b : kProtocols)
    if (scan_for(b)) backends.push_back(b);
  for (const std::string& backend : backends) {
    std::vector<Call> calls;
    const ScanDirection F = ScanDirection::forward, R = ScanDirection::reverse;
    calls.push_back({F, 256, 64, 16, true, false, 1});
    calls.push_back({R, 256, 64, 16, false, false, 2});
    calls.push_back({F, 96, 37, 96, false, false, 3});
    calls.push_back({R, 1024, 128, 8, true, false, 4});
    calls.push_back({F, 1024, 128, 1, true, false, 5});
    calls.push_back({F, 256, 64, 256, true, false, 6});
    calls.push_back({R, 96, 37, 2, true, false, 7});
    calls.push_back({F, 256, 64, 16, true, true, 8});  // exact arithmetic: bit-for-bit
    calls.push_back({R, 256, 64, 4, true, true, 9});
    run_batch(backend, calls);
  }
}

// The node-aware scans over NCCL (DESIGN §10): host-hier and host-logdepth, and the rail scans (the device All-Scan
// in segments of a node's ranks, NCCL between the nodes), on 1 and 2 ranks per simulated node where that divides the
// world, back to back through one object each. They sum a rank's predecessors' decays before exp and regroup the folds, so
// the bound is 16 times the chain's: the sum of h decays of at most 3 in magnitude, rounded h times, moves exp by a
// few ulp per unit of its argument (decays of -40 make the term ~4e-18, nothing against A). Exact data stays exact.
TEST(AllScanGpuNodes, NodeAwareScansGiveTheSequentialFold) {
  SKIP_IF_NO_GPU();
  const int P = g_rt->world();
  const Topology launch = g_rt->topo;
  const ScanDirection F = ScanDirection::forward, R = ScanDirection::reverse;
  for (int rpn : {1, 2}) {
    if (P % rpn) continue;
    g_rt->topo.ranks_per_node = rpn, g_rt->topo.nodes = P / rpn, g_rt->topo.simulated = true;
    for (const std::string variant : {"host-hier", "host-logdepth", "rail", "rail-logdepth"}) {
      const std::unique_ptr<AllScan> scan = make_all_scan(*g_rt, variant, 4096, kCapacity);
      const std::vector<Call> calls = {{F, 256, 64, 16, true, false, 1},  {R, 256, 64, 16, false, false, 2},
                                       {F, 96, 37, 96, false, false, 3},  {R, 1024, 128, 8, true, false, 4},
                                       {F, 4096, 128, 1, true, false, 5}, {R, 7, 37, 7, true, false, 6},
                                       {F, 256, 64, 16, true, true, 7},   {R, 256, 64, 4, true, true, 8}};
      run_batch_on(nullptr, variant + " " + g_rt->topo.describe(), calls, scan.get(), 16);
    }
  }
  g_rt->topo = launch;
}

TEST(AllScanGpuMixed, ManyBackToBackCallsReuseTheDoubleBuffer) {
  SKIP_IF_NO_GPU();
  if (g_scans.empty()) GTEST_SKIP() << "device backend unavailable: " << g_device_unavailable;
  // The packet protocols trust a tag to vouch for the values stored with it in one access: 40 calls of a 2 MiB
  // state per protocol, every element checked, would catch a torn access (old values under a new tag).
  for (const auto& [backend, scan] : g_scans) {
    std::vector<Call> calls;
    for (unsigned i = 0; i < 40; ++i)
      calls.push_back({i % 3 == 2 ? ScanDirection::reverse : ScanDirection::forward, 4096, 128, i % 2 ? 8 : 64,
                       i % 4 == 0, false, 100 + i});
    run_batch(backend, calls);
  }
}

// The packet protocols at other CTA counts (SPB_ALLSCAN_CTAS: how the units are dealt, one CTA up to more than the
// units of a small state) and units per round (SPB_ALLSCAN_UNROLL: one kernel instantiation each; 2 MiB gives
// several rounds per thread, partial last rounds, and threads with no unit at all), back to back in both directions.
TEST(AllScanGpuKnobs, EveryCtaCountAndUnrollGivesTheSequentialFold) {
  SKIP_IF_NO_GPU();
  if (g_scans.empty()) GTEST_SKIP() << "device backend unavailable: " << g_device_unavailable;
  const std::vector<std::pair<int, int>> knobs = {{1, 1}, {7, 2}, {16, 4}, {64, 8}, {128, 8}, {32, 1}};
  const ScanDirection F = ScanDirection::forward, R = ScanDirection::reverse;
  for (const std::string backend : {"device-ll", "device-ll16"}) {
    for (auto [ctas, unroll] : knobs) {
      auto scan = make_scan_with_env(backend, kCapacity,
                                     {{"SPB_ALLSCAN_CTAS", std::to_string(ctas)},
                                      {"SPB_ALLSCAN_UNROLL", std::to_string(unroll)}});
      std::vector<Call> calls = {{F, 256, 64, 16, true, false, 1}, {R, 7, 37, 7, false, false, 2},
                                 {F, 96, 37, 2, false, false, 3},  {R, 256, 64, 4, true, true, 4},
                                 {F, 256, 64, 1, true, true, 5}};
      for (unsigned i = 0; i < 6; ++i)
        calls.push_back({i % 2 ? R : F, 4096, 128, 16, i % 3 == 0, false, 50 + i});
      run_batch_on(scan.get(), backend + " ctas " + std::to_string(ctas) + " unroll " + std::to_string(unroll),
                   calls);
    }
  }
  EXPECT_THROW(make_scan_with_env("device-ll", 4096, {{"SPB_ALLSCAN_UNROLL", "3"}}), UsageError);
  g_boot->barrier();
}

TEST(AllScanGpuUsage, BlocksThatDoNotDivideTheRowsThrow) {
  SKIP_IF_NO_GPU();
  Device& dev = *g_rt->dev;
  Buffer decay(dev, 256 * 4), local(dev, 256 * 64 * 4), cin(dev, 256 * 64 * 4), cout(dev, 256 * 64 * 4);
  AllScanArgs a;
  a.rows = 256;
  a.cols = 64;
  a.blocks = 3;
  a.transition = decay.f32();
  a.local = local.f32();
  a.carry_in = cin.f32();
  a.carry_out = cout.f32();
  EXPECT_THROW(all_scan_host(*g_rt, a, dev.compute_stream()), UsageError);
  a.blocks = 0;
  EXPECT_THROW(all_scan_host(*g_rt, a, dev.compute_stream()), UsageError);
  for (const auto& [backend, scan] : g_scans) {
    a.blocks = 3;
    a.rows = 256;
    EXPECT_THROW(scan->run(a, dev.compute_stream()), UsageError) << backend;
    a.blocks = 512;
    EXPECT_THROW(scan->run(a, dev.compute_stream()), UsageError) << backend;
    a.blocks = 1;
    a.rows = kCapacity;  // rows x cols over the capacity
    EXPECT_THROW(scan->run(a, dev.compute_stream()), UsageError) << backend;
  }
  EXPECT_THROW(make_device_all_scan(*g_rt, 4096, "device-ll32"), UsageError);
  g_boot->barrier();
}

// --- link probes and a first timing (informational; printed on rank 0) ------------------------------------------
TEST(AllScanGpuProbe, FlagLatencyAndPairBandwidth) {
  SKIP_IF_NO_GPU();
  const int P = g_rt->world();
  if (P < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<std::pair<int, int>> pairs = {{0, 1}};
  if (P > 2) pairs.push_back({0, P - 1});
  for (auto [a, b] : pairs) {
    const double lat = probe_flag_latency_us(*g_rt, a, b);
    if (g_boot->rank() == 0) std::printf("[probe] flag latency %d<->%d: %.3f us one hop\n", a, b, lat);
    EXPECT_GT(lat, 0.0);
    EXPECT_LT(lat, 100.0);
  }
  for (int ctas : {1, 4, 16, 32, 0}) {
    const double bw = probe_pair_bandwidth_gbs(*g_rt, 0, 1, size_t(256) << 20, ctas);
    if (g_boot->rank() == 0)
      std::printf("[probe] pair bandwidth 0->1, %s CTAs: %.1f GB/s\n",
                  ctas ? std::to_string(ctas).c_str() : "all", bw);
    EXPECT_GT(bw, 1.0);
  }
}

TEST(AllScanGpuProbe, AllScanTimes) {
  SKIP_IF_NO_GPU();
  Runtime& rt = *g_rt;
  Device& dev = *rt.dev;
  const size_t cols = 128;
  Event e0 = dev.create_event(), e1 = dev.create_event();
  const Stream st = dev.compute_stream();
  for (size_t rows : {size_t(1024), size_t(4096)}) {  // 512 KB and 2 MB states (e.g. H = 8 or 32, dk = dv = 128)
    const size_t n = rows * cols;
    Buffer decay(dev, rows * 4), local(dev, n * 4), cin(dev, n * 4), cout(dev, n * 4);
    const CallData d = make_data(7, rt.world(), rows, cols, false, false);
    dev.upload(decay.get(), d.decay[rt.rank()].data(), rows * 4);
    dev.upload(local.get(), d.local[rt.rank()].data(), n * 4);
    std::vector<std::string> backends = {"host"};
    for (const auto& b : kProtocols)
      if (scan_for(b)) backends.push_back(b);
    for (const std::string& backend : backends) {
      DeviceAllScan* scan = scan_for(backend);
      for (int K : {1, 4, 16, 64}) {
        if (scan && backend != "device-flag" && K != 16) continue;  // the packet protocols ignore K
        AllScanArgs a;
        a.rows = rows;
        a.cols = cols;
        a.blocks = K;
        a.transition = decay.f32();
        a.local = local.f32();
        a.carry_in = cin.f32();
        a.carry_out = cout.f32();
        std::vector<double> t;
        for (int it = 0; it < 25; ++it) {
          g_boot->barrier();
          dev.record(e0, st);
          if (scan) scan->run(a, st);
          else all_scan_host(rt, a, st);
          dev.record(e1, st);
          const double ms = dev.elapsed_ms(e0, e1);
          if (it >= 5) t.push_back(g_boot->max(ms));  // the slowest rank sets the time
        }
        if (scan) scan->check(st);
        std::sort(t.begin(), t.end());
        if (g_boot->rank() == 0)
          std::printf("[time] All-Scan %-11s P=%d state %zux%zu (%zu KB) K=%-3d median %.1f us, min %.1f us\n",
                      backend.c_str(), rt.world(), rows, cols, n * 4 / 1024, K, t[t.size() / 2] * 1e3,
                      t[0] * 1e3);
      }
    }
  }
  dev.destroy_event(e0);
  dev.destroy_event(e1);
}

// SPB_ALLSCAN_TRACE: the traced kernels give the same results as the untraced ones, and at destruction every rank
// writes one row per CTA for each of the ring's last 64 calls (70 are made: the ring wraps), with stamps in the
// order the kernel takes them, and one meta row (calibration, clock offset to rank p-1). Read back by
// runtime/csv.h's read_csv (which also rejects a row with too few or too many fields).
TEST(AllScanGpuTrace, TracedCallsAreCorrectAndEveryRankWritesOrderedStamps) {
  SKIP_IF_NO_GPU();
  if (g_scans.empty()) GTEST_SKIP() << "device backend unavailable: " << g_device_unavailable;
  const int p = g_boot->rank(), P = g_boot->size();
  long long pid = getpid();
  g_boot->broadcast(&pid, sizeof(pid), 0);  // rank 0's prefix is the one every rank uses
  const ScanDirection F = ScanDirection::forward, R = ScanDirection::reverse;
  for (const std::string& backend : kProtocols) {
    const std::string prefix = "/tmp/spb_trace_test_" + std::to_string(pid) + "_" + backend;
    const int ncalls = 70;
    {
      auto scan = make_scan_with_env(backend, kCapacity, {{"SPB_ALLSCAN_TRACE", prefix}});
      std::vector<Call> calls;
      for (int i = 0; i < ncalls; ++i)
        calls.push_back({i % 3 == 1 ? R : F, i % 10 == 0 ? 4096u : 256u, i % 10 == 0 ? 128u : 64u, 16,
                         i % 4 == 0, false, 300u + unsigned(i)});
      run_batch_on(scan.get(), backend + " traced", calls);
    }  // destroyed (collective): the trace files are written
    const std::string base = prefix + ".rank" + std::to_string(p);
    const auto meta = read_csv(base + ".meta.csv");
    ASSERT_EQ(meta.size(), 1u) << base << ".meta.csv";
    const auto& m = meta[0];
    EXPECT_EQ(m.at("proto"), backend);
    EXPECT_EQ(std::stoi(m.at("ranks")), P);
    EXPECT_EQ(std::stoi(m.at("calls")), ncalls);
    EXPECT_GT(std::stod(m.at("clk_ghz_start")), 0.3);
    EXPECT_GT(std::stod(m.at("gt_step_ns")), 0.0);
    if (p > 0) {
      ASSERT_FALSE(m.at("prev_offset_ns").empty()) << "rank " << p << ": no clock offset to rank p-1";
      EXPECT_GT(std::stod(m.at("prev_rtt_ns")), 0.0);
      EXPECT_LT(std::stod(m.at("prev_rtt_ns")), 100000.0);
    }
    const int ctas = std::stoi(m.at("ctas"));
    const auto rows = read_csv(base + ".csv");
    EXPECT_EQ(rows.size(), size_t(64) * size_t(ctas)) << base << ".csv: one row per CTA and call of the ring";
    std::map<int, long long> units_per_call;
    int bad = 0;
    for (const auto& r : rows) {
      auto num = [&](const char* k) { return r.at(k).empty() ? 0ull : std::stoull(r.at(k)); };
      const int call = std::stoi(r.at("call")), dir = std::stoi(r.at("dir"));
      const unsigned long long entry = num("entry_ns"), pro = num("prologue_ns"), in = num("first_in_ns"),
                               out = num("last_out_ns"), exit = num("exit_ns");
      const long long units = std::stoll(r.at("units"));
      units_per_call[call] += units;
      const bool has_prev = dir == 0 ? p > 0 : p < P - 1;
      bool ok = std::stoi(r.at("rank")) == p && call > ncalls - 64 && call <= ncalls && entry > 0 && entry <= pro &&
                pro <= exit && out <= exit && (in > 0) == (has_prev && units > 0) && (out > 0) == (units > 0) &&
                (in == 0 || (entry <= in && in <= out)) && (num("exit_clk") >= num("entry_clk"));
      if (!ok && bad++ < 4) {
        std::string line;
        for (const auto& [k, v] : r) line += k + "=" + v + " ";
        std::fprintf(stderr, "[rank %d] %s trace row out of order: %s\n", p, backend.c_str(), line.c_str());
      }
    }
    EXPECT_EQ(bad, 0) << backend << " rank " << p;
    EXPECT_EQ(units_per_call.size(), 64u);
    for (const auto& [call, units] : units_per_call) EXPECT_GT(units, 0) << backend << " call " << call;
    g_boot->barrier();  // everyone has read its files
    std::remove((base + ".csv").c_str());
    std::remove((base + ".meta.csv").c_str());
  }
  g_boot->barrier();
}

// Last, since it breaks an object on purpose (its own, not the shared one): rank 0 skips a call; the others must
// give up after SPB_SPIN_TIMEOUT_S (1 s here), name rank 0, and tear down without waiting for each other.
class AllScanGpuZFault : public testing::TestWithParam<std::string> {};

TEST_P(AllScanGpuZFault, AMissingRankIsNamedAndNobodyHangs) {
  SKIP_IF_NO_GPU();
  Runtime& rt = *g_rt;
  const int p = rt.rank(), P = rt.world();
  if (P < 2 || g_scans.empty()) GTEST_SKIP() << "needs two ranks and the device backend";
  auto scan = make_scan_with_env(GetParam(), 4096, {{"SPB_SPIN_TIMEOUT_S", "1"}});
  Device& dev = *rt.dev;
  const size_t rows = 32, cols = 128, n = rows * cols;
  Buffer decay(dev, rows * 4), local(dev, n * 4), cin(dev, n * 4), cout(dev, n * 4);
  const CallData d = make_data(11, P, rows, cols, false, false);
  dev.upload(decay.get(), d.decay[p].data(), rows * 4);
  dev.upload(local.get(), d.local[p].data(), n * 4);
  AllScanArgs a;
  a.rows = rows;
  a.cols = cols;
  a.blocks = 4;
  a.transition = decay.f32();
  a.local = local.f32();
  a.carry_in = cin.f32();
  a.carry_out = cout.f32();
  const Stream st = dev.compute_stream();
  scan->run(a, st);  // a healthy call first
  EXPECT_NO_THROW(scan->check(st));
  g_boot->barrier();
  if (p != 0) scan->run(a, st);  // rank 0 does not arrive
  std::string msg;
  if (p != 0) {
    try {
      scan->check(st);
    } catch (const Error& e) {
      msg = e.what();
    }
  }
  g_boot->barrier();  // rank 0 looks only once the others have given up
  if (p == 0) {
    try {
      scan->check(st);
    } catch (const Error& e) {
      msg = e.what();
    }
  }
  EXPECT_NE(msg.find("rank 0 did not arrive"), std::string::npos) << "rank " << p << ": '" << msg << "'";
  for (int r = 0; r < P; ++r) {
    if (r == p) std::printf("[fault] rank %d: %s\n", p, msg.c_str());
    std::fflush(stdout);
    g_boot->barrier();
  }
  scan.reset();  // broken on every rank: no collective teardown, so nobody waits for rank 0
  g_boot->barrier();
}

INSTANTIATE_TEST_SUITE_P(Gpu, AllScanGpuZFault, testing::ValuesIn(kProtocols),
                         [](const testing::TestParamInfo<std::string>& i) { return test_name(i.param); });

}  // namespace
}  // namespace spb

int main(int argc, char** argv) {
  spb::Bootstrap boot(&argc, &argv);
  spb::g_boot = &boot;
  return spb::test::run_gpu_mpi_tests(
      &argc, argv, boot,
      [&] {
        auto dev = spb::make_cuda_device(boot.local_rank());
        auto kern = spb::make_cuda_kernels();  // its fold is the same fmaf(expf(d), x, y) as the device scan's
        auto comm = spb::make_nccl_communicator(boot, *dev);
        spb::g_rt.reset(new spb::Runtime{boot, "gpu", std::move(dev), std::move(kern), std::move(comm)});
        try {
          for (const std::string& b : spb::kProtocols)
            spb::g_scans[b] = spb::make_device_all_scan(*spb::g_rt, spb::kCapacity, b);
          if (boot.rank() == 0)
            std::printf("device All-Scan transport: %s\n", spb::g_scans.begin()->second->transport().c_str());
        } catch (const spb::UsageError& e) {
          spb::g_device_unavailable = e.what();
          if (boot.rank() == 0) std::printf("device All-Scan unavailable: %s\n", e.what());
        }
      },
      [] {
        spb::g_scans.clear();  // collective teardown, before the communicator
        spb::g_rt.reset();
      });
}
