// The simulated communicator (sim/sim_runtime.h): every operation is MPI in the simulation, run when its stream
// reaches it, after the cost of the transport it stands for (per call and per byte of the call); its stream goes on
// from where it ended.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <functional>
#include <vector>

#include "runtime/bootstrap.h"
#include "runtime/error.h"
#include "sim/sim_runtime.h"

namespace spb {
namespace {

int count_of(size_t bytes) {
  SPB_CHECK(bytes <= size_t(INT_MAX), "a simulated message of more than 2 GiB");
  return int(bytes);
}

class SimComm final : public Communicator {
 public:
  SimComm(Bootstrap& boot, SimDevice& dev, const SimTransport& t) : dev_(dev), t_(t) {
    MPI_Comm_dup(reinterpret_cast<MPI_Comm>(boot.world()), &comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~SimComm() override {
    drain();
    if (scratch_) dev_.clock().shared_free(scratch_);
    MPI_Comm_free(&comm_);
  }

  std::string name() const override { return "sim"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void send(const void* buf, size_t bytes, int peer, Stream s) override {
    if (group_) {
      group_sent_ += bytes;
      return pend(s, [=] { post_send(buf, bytes, peer); });
    }
    if (dev_.device_transport()) {
      // A peer write: the kernel pays the block's handshake, starts its bytes and goes on to the next block while
      // they stream (the receiver's flag wait is its receive). The chain's first rank starts a call after a kernel
      // of its own (its carry's copy or zero fill): there the kernel's start is paid once for the call.
      const double start = dev_.after_kernel(s) ? t_.device_call_s : 0.0;
      return call(s, start + t_.device_block_s, [&] {
        reap();
        inflight_.emplace_back();
        MPI_Isend(buf, count_of(bytes), MPI_BYTE, peer, kTag, comm_, &inflight_.back());
      });
    }
    call(s, t_.nccl_p2p.seconds(double(bytes)),
         [&] { MPI_Send(buf, count_of(bytes), MPI_BYTE, peer, kTag, comm_); });
  }
  void recv(void* buf, size_t bytes, int peer, Stream s) override {
    if (group_) {
      group_received_ += bytes;
      return pend(s, [=] { post_recv(buf, bytes, peer); });
    }
    call(s, dev_.device_transport() ? 0.0 : t_.nccl_p2p.seconds(double(bytes)),
         [&] { MPI_Recv(buf, count_of(bytes), MPI_BYTE, peer, kTag, comm_, MPI_STATUS_IGNORE); });
  }
  void group_start() override {
    SPB_CHECK(!group_, "nested group_start");
    group_ = true;
  }
  void group_end() override {
    SPB_CHECK(group_, "group_end without group_start");
    group_ = false;
    if (posts_.empty()) return;
    // One call for the whole group (NCCL launches one kernel): it starts once every stream in it has reached it.
    drain();
    for (Stream s : group_streams_) dev_.host_reaches(s);
    // Its bytes: the more of what this rank sends and receives in it.
    charge(dev_.device_transport() ? t_.device_block_s
                                   : t_.nccl_group.seconds(double(std::max(group_sent_, group_received_))));
    for (auto& post : posts_) post();
    MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    for (Stream s : group_streams_) dev_.stream_done_now(s);
    posts_.clear(), requests_.clear(), group_streams_.clear();
    group_sent_ = group_received_ = 0;
  }
  void all_gather(const void* send, void* recv, size_t bytes, Stream s) override {
    const bool in_place = send == static_cast<const char*>(recv) + size_t(rank_) * bytes;
    drain();
    call(s, t_.nccl_allgather.seconds(double(bytes)), [&] {
      MPI_Allgather(in_place ? MPI_IN_PLACE : send, count_of(bytes), MPI_BYTE, recv, count_of(bytes), MPI_BYTE, comm_);
    });
  }
  void all_to_all(const void* send, void* recv, size_t bytes, Stream s) override {
    drain();
    call(s, t_.nccl_alltoall.seconds(double(bytes)),
         [&] { MPI_Alltoall(send, count_of(bytes), MPI_BYTE, recv, count_of(bytes), MPI_BYTE, comm_); });
  }
  void barrier(Stream s) override {
    drain();
    call(s, t_.nccl_allreduce.seconds(0), [&] { MPI_Barrier(comm_); });
  }
  // NCCL's ring (sim/sim_runtime.h): P - 1 steps for the reduce-scatter, P - 1 more for the all-reduce's all-gather.
  void all_reduce_sum(float* buf, size_t n, Stream s) override {
    drain();
    call(s, t_.nccl_allreduce.seconds(double(n) * 4), [&] { ring(buf, n * 4, 2 * (size_ - 1)); });
  }
  void reduce_scatter_sum(float* buf, size_t n, Stream s) override {
    drain();
    call(s, t_.nccl_allreduce.seconds(double(n) * 4), [&] { ring(buf, n * 4 * size_t(size_), size_ - 1); });
  }

 private:
  static constexpr int kTag = 7;
  // NCCL runs a ring on several channels: across DGX H100 nodes, one a NIC (8), so a node's crossing uses its 8
  // NICs (sim/platforms/dgx-h100.xml gives each flow a NIC). On one node the flows share the GPUs' links as one would.
  static constexpr int kRingChannels = 8;
  void charge(double seconds) {
    if (seconds > 0) dev_.clock().advance_to(dev_.clock().now() + seconds);
  }
  // The device transport's writes still streaming: finished ones are let go as new ones start, and a collective or
  // a group (which the device All-Scan never issues) first waits for the rest.
  void reap() {
    int done = 0;
    if (inflight_.empty()) return;
    MPI_Testall(int(inflight_.size()), inflight_.data(), &done, MPI_STATUSES_IGNORE);
    if (done) inflight_.clear();
  }
  void drain() {
    if (inflight_.empty()) return;
    MPI_Waitall(int(inflight_.size()), inflight_.data(), MPI_STATUSES_IGNORE);
    inflight_.clear();
  }
  template <class Op>
  void call(Stream s, double cost, Op&& op) {
    dev_.host_reaches(s);
    charge(cost);
    op();
    dev_.stream_done_now(s);
  }
  template <class Post>
  void pend(Stream s, Post post) {
    if (std::find_if(group_streams_.begin(), group_streams_.end(), [&](Stream x) { return x.handle == s.handle; }) ==
        group_streams_.end())
      group_streams_.push_back(s);
    posts_.push_back(post);
  }
  void post_send(const void* buf, size_t bytes, int peer) {
    requests_.emplace_back();
    MPI_Isend(buf, count_of(bytes), MPI_BYTE, peer, kTag, comm_, &requests_.back());
  }
  void post_recv(void* buf, size_t bytes, int peer) {
    requests_.emplace_back();
    MPI_Irecv(buf, count_of(bytes), MPI_BYTE, peer, kTag, comm_, &requests_.back());
  }

  // `steps` steps of a ring over a buffer of `bytes`, each passing one P-th of it to the next rank. Nothing is
  // summed (the simulation's values do not matter), and the steps' bytes move at once: the rank sends steps / P of
  // the buffer to the next rank, in kRingChannels flows, and pays the other steps' latency, each the ring's slowest
  // hop. So a call is P x kRingChannels messages whatever P, where step by step it would be P x steps (2 P^2 for an
  // all-reduce: hours at 256 ranks), and it takes what the steps would: every step's latency, and the bytes at the
  // rate of the ring's slowest link (each step moves the same piece over every hop at once).
  void ring(float* buf, size_t bytes, int steps) {
    if (size_ == 1 || bytes == 0) return;
    const size_t total = bytes / size_t(size_) * size_t(steps), flow = (total + kRingChannels - 1) / kRingChannels;
    if (scratch_bytes_ < flow) {
      if (scratch_) dev_.clock().shared_free(scratch_);
      scratch_ = dev_.clock().shared_alloc(scratch_bytes_ = flow);
    }
    charge(double(steps - 1) * ring_hop_latency());
    MPI_Request r[2 * kRingChannels];
    for (int c = 0; c < kRingChannels; ++c) {  // every flow reads the buffer's first bytes and lands on the scratch's
      const size_t b = std::min(flow, total - std::min(total, size_t(c) * flow));
      MPI_Irecv(scratch_, count_of(b), MPI_BYTE, ring_prev(), kTag, comm_, &r[2 * c]);
      MPI_Isend(buf, count_of(b), MPI_BYTE, ring_next(), kTag, comm_, &r[2 * c + 1]);
    }
    MPI_Waitall(2 * kRingChannels, r, MPI_STATUSES_IGNORE);
  }
  int ring_next() const { return (rank_ + 1) % size_; }
  int ring_prev() const { return (rank_ + size_ - 1) % size_; }
  // The slowest hop of the ring on the platform (found at the first ring: every rank's latency to the next).
  double ring_hop_latency() {
    if (ring_hop_s_ >= 0) return ring_hop_s_;
    char name[MPI_MAX_PROCESSOR_NAME] = {}, next_name[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    MPI_Sendrecv(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, ring_prev(), kTag, next_name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                 ring_next(), kTag, comm_, MPI_STATUS_IGNORE);
    double hop = dev_.clock().route_latency_s(next_name);
    MPI_Allreduce(MPI_IN_PLACE, &hop, 1, MPI_DOUBLE, MPI_MAX, comm_);
    return ring_hop_s_ = hop;
  }

  SimDevice& dev_;
  SimTransport t_;
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  bool group_ = false;
  size_t group_sent_ = 0, group_received_ = 0;  // this rank's bytes in the open group
  std::vector<std::function<void()>> posts_;
  std::vector<MPI_Request> requests_, inflight_;
  std::vector<Stream> group_streams_;
  void* scratch_ = nullptr;  // where the ring's flows arrive (shared memory: what they carry does not matter)
  size_t scratch_bytes_ = 0;
  double ring_hop_s_ = -1;  // not yet found
};

}  // namespace

std::unique_ptr<Communicator> make_sim_communicator(Bootstrap& boot, SimDevice& dev, const SimTransport& t) {
  return std::make_unique<SimComm>(boot, dev, t);
}

}  // namespace spb
