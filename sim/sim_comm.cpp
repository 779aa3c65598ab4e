// The simulated communicator (sim/sim_runtime.h): every operation is MPI in the simulation, run when its stream
// reaches it, after the cost of the transport it stands for (per call and per byte of the call); its stream goes on
// from where it ended. The collectives are point-to-point messages moved as NCCL moves them (NCCL's channels' rings,
// grouped sends); no SMPI collective carries bytes, so none meets SMPI's 2 GiB limits.
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
  SPB_USAGE_RANK(bytes <= size_t(INT_MAX), "--backend sim: a point-to-point message of " + std::to_string(bytes) +
                                               " bytes; SMPI moves at most 2 GiB in one message");
  return int(bytes);
}

class SimComm final : public Communicator {
 public:
  SimComm(Bootstrap& boot, SimDevice& dev, const SimTransport& t, int ranks_per_node) : dev_(dev), t_(t) {
    MPI_Comm_dup(reinterpret_cast<MPI_Comm>(boot.world()), &comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    node_ = ranks_per_node > 0 && size_ % ranks_per_node == 0 ? ranks_per_node : size_;
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
  // NCCL's ring: P - 1 steps, each passing one piece to the next rank (ring()). What it gathers does not matter.
  void all_gather(const void*, void* recv, size_t bytes, Stream s) override {
    drain();
    call(s, t_.nccl_allgather.seconds(double(bytes)), [&] { ring(recv, bytes * size_t(size_), size_ - 1); });
  }
  // NCCL's grouped sends and receives, one piece to and from every other rank, all posted at once. Across nodes as
  // NCCL's PXN moves them (on by default): a piece for GPU h of another node goes over NVLink to this node's GPU h
  // first, which sends the pieces of all its node's GPUs for that GPU over its own NIC at once, so every network
  // flow stays on its rail and a node's spread over its 8 NICs. The hops move at once (NCCL pipelines them in
  // chunks), so a rank posts G - 1 messages in its node and one to every other node: 38 at 256 ranks of 8 a node,
  // where a message to every peer (255) made SimGrid's flows too many to finish (sim/NOTES.md).
  void all_to_all(const void* send, void* recv, size_t bytes, Stream s) override {
    drain();
    call(s, t_.nccl_alltoall.seconds(double(bytes)), [&] {
      const int nodes = size_ / node_, node = rank_ / node_, local = rank_ % node_;
      const char* from = static_cast<const char*>(send);
      char* to = static_cast<char*>(recv);  // what lands where does not matter (no data), only inside the buffer
      std::vector<MPI_Request> r;
      for (int i = 1; i < node_; ++i) {  // this node's GPUs: a piece of its own and one for each other node
        const int next = node * node_ + (local + i) % node_, prev = node * node_ + (local + node_ - i) % node_;
        recv_parts(to + size_t(i - 1) * nodes * bytes, size_t(nodes) * bytes, prev, r);
        send_parts(from, size_t(nodes) * bytes, next, r);
      }
      for (int i = 1; i < nodes; ++i) {  // the same GPU of each other node: its node's pieces for that GPU
        const int next = (node + i) % nodes * node_ + local, prev = (node + nodes - i) % nodes * node_ + local;
        recv_parts(to + size_t(i - 1) * node_ * bytes, size_t(node_) * bytes, prev, r);
        send_parts(from, size_t(node_) * bytes, next, r);
      }
      MPI_Waitall(int(r.size()), r.data(), MPI_STATUSES_IGNORE);
    });
  }
  void barrier(Stream s) override {
    drain();
    call(s, t_.nccl_allreduce.seconds(0), [&] { MPI_Barrier(comm_); });
  }
  // NCCL's ring (sim/sim_runtime.h): P - 1 steps for the reduce-scatter, P - 1 more for the all-reduce's all-gather.
  // Its cost counts its piece (a P-th of the buffer, what each step passes), as the all-gather's and the
  // reduce-scatter's count theirs.
  void all_reduce_sum(float* buf, size_t n, Stream s) override {
    drain();
    call(s, t_.nccl_allreduce.seconds(double(n) * 4 / size_), [&] { ring(buf, n * 4, 2 * (size_ - 1)); });
  }
  void reduce_scatter_sum(float* buf, size_t n, Stream s) override {
    drain();
    call(s, t_.nccl_allreduce.seconds(double(n) * 4), [&] { ring(buf, n * 4 * size_t(size_), size_ - 1); });
  }

 private:
  static constexpr int kTag = 7, kCollectiveTag = 8;
  // NCCL's channels on a DGX H100: 8 rings, one leaving each GPU of a node (ring_next), so a node's crossings use
  // its 8 NICs (sim/platforms/dgx-h100.xml: a rail each). On one node the flows share the GPUs' links as one would.
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

  // A collective's message: at most kMaxMessage bytes (SMPI counts in int), so a larger one is several, all posted
  // at once on the same route (together they take what one would). A collective's sends are synchronous (never
  // eager, whatever their size): SMPI 3.32 keeps eager ones in a list it walks at every completion (sim/NOTES.md),
  // and an all-to-all posts P - 1 of them.
  static constexpr size_t kMaxMessage = size_t(1) << 30;
  void send_parts(const void* buf, size_t bytes, int peer, std::vector<MPI_Request>& r) {
    for (size_t at = 0; at < bytes; at += kMaxMessage) {
      r.emplace_back();
      MPI_Issend(static_cast<const char*>(buf) + at, int(std::min(kMaxMessage, bytes - at)), MPI_BYTE, peer,
                 kCollectiveTag, comm_, &r.back());
    }
  }
  void recv_parts(void* buf, size_t bytes, int peer, std::vector<MPI_Request>& r) {
    for (size_t at = 0; at < bytes; at += kMaxMessage) {
      r.emplace_back();
      MPI_Irecv(static_cast<char*>(buf) + at, int(std::min(kMaxMessage, bytes - at)), MPI_BYTE, peer,
                kCollectiveTag, comm_, &r.back());
    }
  }

  // `steps` steps of NCCL's ring over a buffer of `bytes`, each passing one P-th of it to the next rank, on
  // kRingChannels channels, each its own ring (ring_next). Nothing is summed (the simulation's values do not matter),
  // and the steps' bytes move at once: on every channel the rank sends its share of steps / P of the buffer to the
  // channel's next rank, and pays the other steps' latency, each the rings' slowest hop. So a call is P x
  // kRingChannels messages whatever P, where step by step it would be P x steps x kRingChannels (hours at 256 ranks),
  // and it takes what the steps would: every step's latency, and the bytes at the rate of the slowest link (each step
  // moves the same piece over every hop at once).
  void ring(void* buf, size_t bytes, int steps) {
    if (size_ == 1 || bytes == 0) return;
    const size_t total = bytes / size_t(size_) * size_t(steps), flow = (total + kRingChannels - 1) / kRingChannels;
    const size_t landing = std::min(flow, kMaxMessage);
    if (scratch_bytes_ < landing) {
      if (scratch_) dev_.clock().shared_free(scratch_);
      scratch_ = dev_.clock().shared_alloc(scratch_bytes_ = landing);
    }
    charge(double(steps - 1) * ring_hop_latency());
    std::vector<MPI_Request> r;
    for (int c = 0; c < kRingChannels; ++c) {  // every flow reads the buffer's first bytes, lands on the scratch's
      const size_t b = std::min(flow, total - std::min(total, size_t(c) * flow));
      for (size_t at = 0; at < b; at += kMaxMessage) {
        const int n = int(std::min(kMaxMessage, b - at));
        r.emplace_back(), MPI_Irecv(scratch_, n, MPI_BYTE, ring_prev(c), kCollectiveTag, comm_, &r.back());
        r.emplace_back(), MPI_Issend(buf, n, MPI_BYTE, ring_next(c), kCollectiveTag, comm_, &r.back());
      }
    }
    MPI_Waitall(int(r.size()), r.data(), MPI_STATUSES_IGNORE);
  }
  // Channel c's ring, as NCCL lays rings on nodes of G GPUs: it enters every node at the node's GPU c % G, goes round
  // the node's GPUs in order and leaves from the GPU before that one to the next node's GPU c % G. So each GPU of a
  // node leaves it on one channel and enters it on one: a node's crossings spread over its GPUs' NICs, one channel
  // each, where one ring in rank order would cross at one GPU and hold a node to that GPU's NIC. On one node every
  // channel is the ring in rank order. (A channel and its sends and receives match in the same order on both sides.)
  int ring_next(int c) const {
    const int node = rank_ / node_, local = rank_ % node_, entry = c % node_, nodes = size_ / node_;
    return (local + 1) % node_ == entry ? (node + 1) % nodes * node_ + entry : node * node_ + (local + 1) % node_;
  }
  int ring_prev(int c) const {
    const int node = rank_ / node_, local = rank_ % node_, entry = c % node_, nodes = size_ / node_;
    return local == entry ? (node + nodes - 1) % nodes * node_ + (entry + node_ - 1) % node_
                          : node * node_ + (local + node_ - 1) % node_;
  }
  // The slowest hop of the rings on the platform (found at the first ring: every rank's latency to each channel's
  // next rank).
  double ring_hop_latency() {
    if (ring_hop_s_ >= 0) return ring_hop_s_;
    char name[MPI_MAX_PROCESSOR_NAME] = {}, next_name[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    double hop = 0;
    for (int c = 0; c < kRingChannels; ++c) {
      MPI_Sendrecv(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, ring_prev(c), kTag, next_name, MPI_MAX_PROCESSOR_NAME,
                   MPI_CHAR, ring_next(c), kTag, comm_, MPI_STATUS_IGNORE);
      hop = std::max(hop, dev_.clock().route_latency_s(next_name));
    }
    MPI_Allreduce(MPI_IN_PLACE, &hop, 1, MPI_DOUBLE, MPI_MAX, comm_);
    return ring_hop_s_ = hop;
  }

  SimDevice& dev_;
  SimTransport t_;
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1, node_ = 1;  // node_: ranks a node (consecutive ranks; the whole world by default)
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

std::unique_ptr<Communicator> make_sim_communicator(Bootstrap& boot, SimDevice& dev, const SimTransport& t,
                                                   int ranks_per_node) {
  return std::make_unique<SimComm>(boot, dev, t, ranks_per_node);
}

}  // namespace spb
