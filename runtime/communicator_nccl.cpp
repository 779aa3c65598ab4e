// The NCCL communicator: device buffers, every operation ordered on a CUDA stream. Every method's traffic on GPUs
// goes through it, and the `host` All-Scan runs over it (DESIGN §3).
//
// Hang protection: a rank that dies or stops calling must not leave the others waiting forever. The process's
// progress watchdog (runtime/watchdog.h, DESIGN §11) follows two kinds of NCCL wait through a probe of this
// communicator's, registered before ncclCommInitRank so that a rank that never joins is caught too:
//
//  1. Host side: every NCCL call that can block the calling thread (init, a send/recv that sets up a connection
//     to a new peer, a group end, a collective's enqueue, finalize) is bracketed; a call still inside NCCL after
//     SPB_TIMEOUT_S seconds is a hang.
//  2. GPU side: once enqueued, a send/recv/collective whose peer never arrives spins inside NCCL's kernel, and the
//     host only finds out in some later synchronising call, anywhere in the program. So every operation gets an
//     event recorded on its stream just before it ("started": the stream reached the operation) and one just after
//     ("done"). An operation that has started and is not done SPB_TIMEOUT_S seconds later is a hang. The clock
//     starts when the probe first sees the start event complete, so time queued behind other work does not count.
//
//  The watchdog's line names the NCCL operation and the peer rank(s) waited on; its abort hook calls ncclCommAbort
//  (which makes NCCL's kernels and blocking calls return) before the process ends with the watchdog's status 2
//  (mpirun then ends the other ranks): the main thread may be blocked in any CUDA or NCCL call at that moment, so
//  ending the process is the only dependable way out. Point-to-point operations name their peer; for collectives
//  (all_gather, all_to_all, barrier) NCCL offers no way to tell which rank is missing, so every other rank is named
//  as a suspect.
//
//  SPB_TIMEOUT_S: the watchdog's (default 120; 0, or no watchdog started, tracks nothing and waits forever).
//  SPB_NCCL_NONBLOCKING=1 makes the communicator non-blocking (ncclConfig_t::blocking = 0): NCCL then returns
//  ncclInProgress instead of blocking and each call is polled with ncclCommGetAsyncError, so a host-side wait that
//  exceeds SPB_TIMEOUT_S throws spb::Error (after ncclCommAbort) instead of ending the process. It is not the default
//  because NCCL then launches every group from a helper thread, which costs tens of microseconds per operation.
//
// NVLink multicast (NVLS) must stay off on the project's machines: NCCL_NVLS_ENABLE is set to 0 here unless the
// user has set it, before NCCL reads its environment.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/bootstrap.h"
#include "runtime/communicator.h"
#include "runtime/cuda_check.h"
#include "runtime/error.h"
#include "runtime/watchdog.h"

// An NCCL call that must return ncclSuccess; a failure names the call, the file, the line and the rank.
#define SPB_NCCL(call)                                                                                          \
  do {                                                                                                          \
    ncclResult_t r_ = (call);                                                                                   \
    if (r_ != ncclSuccess)                                                                                      \
      ::spb::fail(__FILE__, __LINE__, std::string(#call) + ": " + ncclGetErrorString(r_) + " (" +             \
                                          ncclGetLastError(nullptr) + ")");                                     \
  } while (0)

namespace spb {
namespace {

using Clock = std::chrono::steady_clock;

bool env_flag(const char* name) {
  const char* s = std::getenv(name);
  return s && *s && std::string(s) != "0";
}

std::string rank_list(const std::vector<int>& peers) {
  std::string s;
  for (size_t i = 0; i < peers.size(); ++i) s += (i ? ", " : "") + std::to_string(peers[i]);
  return s.empty() ? "(none)" : s;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One operation as the watchdog sees it; the text is built only when it is reported.
struct OpInfo {
  const char* kind = "";  // "send", "recv", "all_gather", "barrier", "group"
  size_t bytes = 0;
  int count = 0;          // operations in a group
  bool collective = false;
  std::vector<int> peers;
  std::string describe() const {
    std::string s = kind;
    if (count) s += " of " + std::to_string(count) + " operations";
    if (bytes) s += " (" + std::to_string(bytes) + " bytes)";
    return s;
  }
  std::string who() const { return (collective ? "one or more of ranks " : "rank(s) ") + rank_list(peers); }
};

struct Pending {
  OpInfo op;
  cudaEvent_t start = nullptr;
  std::vector<cudaEvent_t> ends;
  bool started = false;
  Clock::time_point started_at;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Bootstrap& boot, Device& dev, std::string name)
      : rank_(boot.rank()), size_(boot.size()), name_(std::move(name)) {
    SPB_CHECK(dev.is_gpu(), "the NCCL communicator needs a GPU device");
    default_stream_ = static_cast<cudaStream_t>(dev.compute_stream().handle);
    SPB_CUDA(cudaStreamGetDevice(default_stream_, &cuda_dev_));
    SPB_CUDA(cudaSetDevice(cuda_dev_));
    timeout_s_ = watchdog_running() ? watchdog_timeout_s() : 0;
    nonblocking_ = env_flag("SPB_NCCL_NONBLOCKING");
    for (int r = 0; r < size_; ++r)
      if (r != rank_) others_.push_back(r);

    ncclUniqueId id;
    if (rank_ == 0) SPB_NCCL(ncclGetUniqueId(&id));
    boot.broadcast(&id, sizeof(id), 0);

    if (timeout_s_ > 0) {
      probe_id_ = watchdog_add_probe([this](double timeout_s, std::string& what, double& waited_s) {
        return probe(timeout_s, what, waited_s);
      });
      hook_id_ = watchdog_add_abort_hook([this] {
        std::lock_guard<std::mutex> lk(mu_);
        if (comm_) ncclCommAbort(comm_);
      });
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = nonblocking_ ? 0 : 1;
    ncclComm_t comm = nullptr;
    OpInfo init{"ncclCommInitRankConfig", 0, 0, true, others_};
    begin_host(init);
    ncclResult_t r = ncclCommInitRankConfig(&comm, size_, id, rank_, &config);
    {
      std::lock_guard<std::mutex> lk(mu_);
      comm_ = comm;
    }
    end_host();
    settle(r, init, __FILE__, __LINE__);

    SPB_CUDA(cudaMalloc(&barrier_buf_, sizeof(int)));
    SPB_CUDA(cudaMemset(barrier_buf_, 0, sizeof(int)));
  }

  ~NcclCommunicator() override {
    cudaSetDevice(cuda_dev_);
    if (comm_) {
      // Finalize flushes outstanding work (bracketed like every blocking call); a stuck one is aborted.
      OpInfo fin{"ncclCommFinalize", 0, 0, true, others_};
      begin_host(fin);
      ncclResult_t state = ncclCommFinalize(comm_);
      const auto t0 = Clock::now();
      while (state == ncclInProgress) {
        if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
        if (timeout_s_ > 0 && seconds_since(t0) > timeout_s_) break;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      end_host();
      ncclComm_t comm = nullptr;
      {
        std::lock_guard<std::mutex> lk(mu_);  // the abort hook no longer sees it
        std::swap(comm, comm_);
      }
      if (state == ncclSuccess) ncclCommDestroy(comm);
      else ncclCommAbort(comm);
    }
    // The probe is not running once removed, so what it watched is this thread's again.
    if (probe_id_) watchdog_remove_probe(probe_id_);
    if (hook_id_) watchdog_remove_abort_hook(hook_id_);
    for (auto& p : arrived_) recycle(p);
    for (auto& p : watching_) recycle(p);
    for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
    if (barrier_buf_) cudaFree(barrier_buf_);
  }

  std::string name() const override { return name_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void* native_handle() const override { return comm_; }

  void send(const void* buf, size_t bytes, int peer, Stream s) override {
    check_peer(peer, "send");
    cudaStream_t st = stream(s);
    tracked(st, {"send", bytes, 0, false, {peer}}, __LINE__,
            [&] { return ncclSend(buf, bytes, ncclChar, peer, comm_, st); });
  }
  void recv(void* buf, size_t bytes, int peer, Stream s) override {
    check_peer(peer, "recv");
    cudaStream_t st = stream(s);
    tracked(st, {"recv", bytes, 0, false, {peer}}, __LINE__,
            [&] { return ncclRecv(buf, bytes, ncclChar, peer, comm_, st); });
  }
  void group_start() override {
    SPB_CHECK(!in_group_, "nested group_start");
    SPB_NCCL(ncclGroupStart());
    in_group_ = true;
    group_ = Pending{};
    group_.op.kind = "group";
    group_streams_.clear();
  }
  void group_end() override {
    SPB_CHECK(in_group_, "group_end without group_start");
    in_group_ = false;
    begin_host(group_.op);
    const ncclResult_t r = ncclGroupEnd();
    end_host();
    settle(r, group_.op, __FILE__, __LINE__);
    if (!group_.start) return;  // empty group, or no watchdog
    for (cudaStream_t st : group_streams_) {
      cudaEvent_t e = take_event();
      SPB_CUDA(cudaEventRecord(e, st));
      group_.ends.push_back(e);
    }
    push(std::move(group_));
  }
  void all_gather(const void* send, void* recv, size_t bytes, Stream s) override {
    cudaStream_t st = stream(s);
    tracked(st, {"all_gather", bytes, 0, true, others_}, __LINE__,
            [&] { return ncclAllGather(send, recv, bytes, ncclChar, comm_, st); });
  }
  void all_to_all(const void* send, void* recv, size_t bytes, Stream s) override {
    cudaStream_t st = stream(s);
    const char* sp = static_cast<const char*>(send);
    char* rp = static_cast<char*>(recv);
    const bool outer = !in_group_;
    if (outer) group_start();
    // Our own block never leaves the GPU.
    if (bytes)
      SPB_CUDA(cudaMemcpyAsync(rp + size_t(rank_) * bytes, sp + size_t(rank_) * bytes, bytes,
                               cudaMemcpyDeviceToDevice, st));
    for (int j = 1; j < size_; ++j) {
      const int to = (rank_ + j) % size_, from = (rank_ - j + size_) % size_;
      this->send(sp + size_t(to) * bytes, bytes, to, s);
      this->recv(rp + size_t(from) * bytes, bytes, from, s);
    }
    if (outer) group_end();
  }
  void all_reduce_sum(float* buf, size_t n, Stream s) override {
    cudaStream_t st = stream(s);
    tracked(st, {"all_reduce", n * sizeof(float), 0, true, others_}, __LINE__,
            [&] { return ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm_, st); });
  }
  void reduce_scatter_sum(float* buf, size_t n, Stream s) override {
    cudaStream_t st = stream(s);
    tracked(st, {"reduce_scatter", n * size_t(size_) * sizeof(float), 0, true, others_}, __LINE__,
            [&] { return ncclReduceScatter(buf, buf + size_t(rank_) * n, n, ncclFloat, ncclSum, comm_, st); });
  }
  void barrier(Stream s) override {
    cudaStream_t st = stream(s);
    tracked(st, {"barrier (an all-reduce of one int)", 0, 0, true, others_}, __LINE__,
            [&] { return ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclInt, ncclSum, comm_, st); });
  }

 private:
  // One NCCL call under the watchdog: bracketed on the host (a call that blocks) and on the stream (an operation
  // whose peer never arrives), its result settled; `line` is the caller's, for the error message.
  template <class Call>
  void tracked(cudaStream_t st, const OpInfo& op, int line, Call&& call) {
    begin_op(st, op);
    begin_host(op);
    const ncclResult_t r = call();
    end_host();
    settle(r, op, __FILE__, line);
    end_op(st);
  }

  cudaStream_t stream(Stream s) const { return s.handle ? static_cast<cudaStream_t>(s.handle) : default_stream_; }
  void check_peer(int peer, const char* op) const {
    SPB_CHECK(peer >= 0 && peer < size_ && peer != rank_,
              std::string(op) + " with peer " + std::to_string(peer) + " in a world of " + std::to_string(size_));
  }

  // The result of an NCCL call. On a non-blocking communicator ncclInProgress means "running in the background":
  // poll until it is done (NCCL requires that before the next call or CUDA work on the stream), with the timeout.
  void settle(ncclResult_t r, const OpInfo& op, const char* file, int line) {
    if (r == ncclInProgress) {
      const auto t0 = Clock::now();
      for (int spin = 0;; ++spin) {
        ncclResult_t state = ncclSuccess;
        r = ncclCommGetAsyncError(comm_, &state);
        if (r != ncclSuccess) break;
        if (state != ncclInProgress) {
          r = state;
          break;
        }
        if (timeout_s_ > 0 && seconds_since(t0) > timeout_s_) {
          const std::string msg = op.describe() + " did not complete on the host within SPB_TIMEOUT_S=" +
                                  std::to_string(timeout_s_) + " s: " + op.who() +
                                  " did not arrive (dead, hung, or calling a different operation); aborting the "
                                  "NCCL communicator";
          abort_comm();
          fail(file, line, msg);
        }
        if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(20));
        else std::this_thread::yield();
      }
    }
    if (r != ncclSuccess)
      fail(file, line, std::string(op.kind) + ": " + ncclGetErrorString(r) + " (" + ncclGetLastError(comm_) + ")");
  }

  void abort_comm() {
    std::lock_guard<std::mutex> lk(mu_);
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  // --- watchdog bookkeeping (main thread side) ---------------------------------------------------------------
  void begin_host(const OpInfo& op) {
    if (timeout_s_ <= 0) return;
    std::lock_guard<std::mutex> lk(mu_);
    host_op_ = op;
    host_busy_ = true;
    host_since_ = Clock::now();
  }
  void end_host() {
    if (timeout_s_ <= 0) return;
    std::lock_guard<std::mutex> lk(mu_);
    host_busy_ = false;
  }
  cudaEvent_t take_event() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (!free_events_.empty()) {
        cudaEvent_t e = free_events_.back();
        free_events_.pop_back();
        return e;
      }
    }
    cudaEvent_t e;
    SPB_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  void recycle(Pending& p) {  // caller holds mu_ (or is the destructor)
    if (p.start) free_events_.push_back(p.start);
    for (cudaEvent_t e : p.ends) free_events_.push_back(e);
    p.start = nullptr;
    p.ends.clear();
  }
  void begin_op(cudaStream_t st, const OpInfo& op) {
    if (timeout_s_ <= 0) return;
    if (in_group_) {  // one record for the whole group; it starts at the first operation's stream position
      if (!group_.start) {
        group_.start = take_event();
        SPB_CUDA(cudaEventRecord(group_.start, st));
      }
      if (std::find(group_streams_.begin(), group_streams_.end(), st) == group_streams_.end())
        group_streams_.push_back(st);
      ++group_.op.count;
      group_.op.bytes += op.bytes;
      for (int p : op.peers)
        if (std::find(group_.op.peers.begin(), group_.op.peers.end(), p) == group_.op.peers.end())
          group_.op.peers.push_back(p);
      return;
    }
    current_ = Pending{};
    current_.op = op;
    current_.start = take_event();
    SPB_CUDA(cudaEventRecord(current_.start, st));
  }
  void end_op(cudaStream_t st) {
    if (timeout_s_ <= 0 || in_group_) return;
    cudaEvent_t e = take_event();
    SPB_CUDA(cudaEventRecord(e, st));
    current_.ends.push_back(e);
    push(std::move(current_));
  }
  void push(Pending&& p) {
    std::lock_guard<std::mutex> lk(mu_);
    arrived_.push_back(std::move(p));
  }

  // --- the watchdog's probe (its thread) -------------------------------------------------------------------
  // True, with the operation and its wait, where one has made no progress for `timeout_s`. The operations queued
  // since the last call move to watching_ under the lock; their events are queried outside it, so the main thread
  // never waits behind the queries.
  bool probe(double timeout_s, std::string& what, double& waited_s) {
    cudaSetDevice(cuda_dev_);
    const auto now = Clock::now();
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (host_busy_ && std::chrono::duration<double>(now - host_since_).count() > timeout_s) {
        what = "NCCL " + host_op_.describe() + ", blocking the host, for " + host_op_.who();
        waited_s = std::chrono::duration<double>(now - host_since_).count();
        return true;
      }
      for (Pending& p : arrived_) watching_.push_back(std::move(p));
      arrived_.clear();
    }
    std::vector<Pending> done;
    size_t kept = 0;
    for (size_t i = 0; i < watching_.size(); ++i) {
      Pending& p = watching_[i];
      // Any answer but "not ready" counts as done: a CUDA error is the main thread's to report, not a hang.
      bool finished = true;
      for (cudaEvent_t e : p.ends) finished = finished && cudaEventQuery(e) != cudaErrorNotReady;
      if (finished) {
        done.push_back(std::move(p));
        continue;
      }
      if (!p.started && cudaEventQuery(p.start) != cudaErrorNotReady) {
        p.started = true;
        p.started_at = now;
      }
      if (p.started && std::chrono::duration<double>(now - p.started_at).count() > timeout_s) {
        what = "NCCL " + p.op.describe() + ", on the GPU, for " + p.op.who();
        waited_s = std::chrono::duration<double>(now - p.started_at).count();
        return true;
      }
      if (kept != i) watching_[kept] = std::move(p);
      ++kept;
    }
    watching_.resize(kept);
    std::vector<cudaEvent_t> extra;
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (Pending& p : done) recycle(p);
      // The pool keeps what one watchdog period enqueues (up to 500 ms of operations), so that the timed loops take
      // events from it instead of creating them; past that, a long run does not hoard them.
      while (free_events_.size() > 65536) {
        extra.push_back(free_events_.back());
        free_events_.pop_back();
      }
    }
    for (cudaEvent_t e : extra) cudaEventDestroy(e);
    return false;
  }

  int rank_, size_;
  std::string name_;  // "nccl", or "nccl-<net>" where each node of simulated ones has its own host id
  int cuda_dev_ = 0;
  double timeout_s_ = 0;  // SPB_TIMEOUT_S where the process watchdog runs; 0 tracks nothing
  bool nonblocking_ = false;
  std::vector<int> others_;
  cudaStream_t default_stream_ = nullptr;
  ncclComm_t comm_ = nullptr;  // written under mu_ (the watchdog aborts it)
  int* barrier_buf_ = nullptr;
  bool in_group_ = false;

  // Operation being built (main thread only).
  Pending current_, group_;
  std::vector<cudaStream_t> group_streams_;

  // Shared with the watchdog's probe, under mu_.
  std::mutex mu_;
  bool host_busy_ = false;
  OpInfo host_op_;
  Clock::time_point host_since_;
  std::vector<Pending> arrived_;  // enqueued since the probe last looked
  std::vector<cudaEvent_t> free_events_;
  // The probe's own.
  std::vector<Pending> watching_;
  int probe_id_ = 0, hook_id_ = 0;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Bootstrap& boot, Device& dev, const std::string& host_id) {
  // Keep NVLink multicast off unless the user asked for it (see the header comment).
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  std::string name = "nccl";
  if (!host_id.empty()) {
    setenv("NCCL_HOSTID", host_id.c_str(), /*overwrite=*/1);
    setenv("NCCL_NET", "Socket", /*overwrite=*/0);
    std::string net = std::getenv("NCCL_NET");
    std::transform(net.begin(), net.end(), net.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    name += "-" + net;
  }
  return std::make_unique<NcclCommunicator>(boot, dev, std::move(name));
}

}  // namespace spb
