// The device-initiated All-Scan (DESIGN §3, backend `device`), and the link probes that calibrate it: the transport
// and the windows, the settings every rank agrees on, the host class (DeviceAllScanImpl) and the probes. The kernels
// and their protocols (credits, acks, buffer reuse, timeouts) are in all_scan_device_protocols.cu, the trace
// (SPB_ALLSCAN_TRACE) in all_scan_device_trace.cu, what the three files share in all_scan_device_common.cuh.
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
#include "zeco/all_scan_device_common.cuh"

// An NCCL call that must return ncclSuccess (or, on a non-blocking communicator, ncclInProgress and then finish).
#define SPB_NCCL_WAIT(comm, call) ::spb::nccl_wait((comm), (call), #call, __FILE__, __LINE__)

namespace spb {
namespace {

using namespace allscan_detail;

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

class DeviceAllScanImpl final : public DeviceAllScan {
 public:
  DeviceAllScanImpl(Runtime& rt, size_t max_elems, const std::string& backend, int ctas, int segment)
      : rt_(rt), max_elems_(max_elems), backend_(backend), segment_(segment > 0 ? segment : rt.world()) {
    SPB_USAGE(rt.world() % segment_ == 0, "device All-Scan: segments of " + std::to_string(segment_) +
                                              " ranks do not divide the world of " + std::to_string(rt.world()));
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

    std::vector<int> wanted;
    for (int q : {rt.rank() - 1, rt.rank() + 1})
      if (in_segment(q)) wanted.push_back(q);
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
      write_trace(trace_dump(), bad);  // before the window goes: the clock-offset ping-pong uses it
      cudaFree(trace_dev_);
    }
    if (bad) win_->set_broken();  // a peer may be gone: skip the collective parts of the teardown
    win_.reset();
    if (err_host_) cudaFreeHost(err_host_);
  }

  std::string transport() const override { return win_->transport(); }
  std::string backend() const override { return backend_; }

  void run(const AllScanArgs& a, Stream st) override {
    require_diagonal_decay(a, "device All-Scan");  // the kernel folds diag(exp decay) in blocks of rows
    validate_blocks(a.rows, a.blocks);
    SPB_USAGE(a.rows * a.cols <= max_elems_, "device All-Scan: a state of " + std::to_string(a.rows) + " x " +
                                                 std::to_string(a.cols) + " exceeds the capacity of " +
                                                 std::to_string(max_elems_) + " elements given at creation");
    throw_if_failed();
    if (a.rows * a.cols == 0) return;
    SPB_CHECK(a.transition && a.local && a.carry_in && a.carry_out, "device All-Scan: a null buffer");
    const bool fwd = a.direction == ScanDirection::forward;
    const int d = fwd ? 0 : 1;
    const unsigned epoch = ++epoch_[d];
    const int p = rt_.rank();
    const int prev = fwd ? p - 1 : p + 1, next = fwd ? p + 1 : p - 1;  // in this rank's segment, or none

    ScanParams sp{};
    sp.decay = a.transition;  // (the diagonal map's: the log-decay of each row)
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
    sp.prev_win = in_segment(prev) ? win_->peer(prev) : nullptr;
    sp.next_win = in_segment(next) ? win_->peer(next) : nullptr;
    SPB_CHECK((!in_segment(prev) || sp.prev_win) && (!in_segment(next) || sp.next_win),
              "device All-Scan: a neighbour's window is not mapped");
    sp.win_minus = in_segment(p - 1) ? win_->peer(p - 1) : nullptr;
    sp.win_plus = in_segment(p + 1) ? win_->peer(p + 1) : nullptr;
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
    const int place = p % segment_, up = fwd ? place : segment_ - 1 - place, down = segment_ - 1 - up;
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
      launch_flag(trace, ctas_, s, sp);
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

  // --- trace (SPB_ALLSCAN_TRACE; all_scan_device_trace.cu) ---------------------------------------------------
  // What write_trace needs of this object.
  TraceDump trace_dump() const {
    const int p = rt_.rank();
    TraceDump t;
    t.ring = trace_dev_;
    t.prefix = trace_prefix_.c_str();
    t.backend = backend_.c_str();
    t.id = trace_id_;
    t.rank = p;
    t.ranks = rt_.world();
    t.ctas = ctas_;
    t.unroll = proto_ == kFlag ? 0 : unroll_;
    t.capacity = max_elems_;
    t.calls = trace_calls_;
    t.start = calib_start_;
    t.self = win_->local();
    t.prev = win_->peer(p - 1);
    t.next = win_->peer(p + 1);
    t.clock_off = clock_off_;
    t.timeout_ns = timeout_ns_;
    return t;
  }

  enum Protocol { kFlag, kLL, kLL16 };
  Runtime& rt_;
  size_t max_elems_;
  // Rank q is a neighbour in this rank's segment (the scan runs inside each group of segment_ consecutive ranks).
  bool in_segment(int q) const { return q >= 0 && q < rt_.world() && q / segment_ == rt_.rank() / segment_; }

  std::string backend_;
  int segment_;
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
                                                    int ctas, int segment) {
  return std::make_unique<DeviceAllScanImpl>(rt, max_elems, resolve_allscan(backend, true), ctas, segment);
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
