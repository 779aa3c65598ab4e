// The simulated communicator (sim/sim_comm.cpp) on two MPI ranks, each on a clock moved by hand: every call pays its
// transport's cost, per call and per byte of the call, on the rank's clock before its bytes move (here MPI moves
// them in no simulated time, so the clock holds the costs alone).
#include "../mpi_test_main.h"
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "sim/sim_runtime.h"

namespace spb {
namespace {

SimCost line(double call_s, double byte_s) {
  SimCost c;
  c.call_s = call_s, c.byte_s = byte_s;
  return c;
}

SimTransport costs() {
  SimTransport t;
  t.nccl_p2p = line(1, 1e-3);
  t.nccl_group = line(2, 1e-3);
  t.nccl_allgather = line(3, 1e-3);
  t.nccl_allgather.split_bytes = 400, t.nccl_allgather.above_call_s = 30, t.nccl_allgather.above_byte_s = 1e-2;
  t.nccl_alltoall = line(4, 1e-3);
  t.nccl_allreduce = line(5, 1e-3);
  t.device_call_s = 6, t.device_block_s = 0.5;
  return t;
}

struct Ranks {
  SimDevice dev{make_manual_clock(), SimGpu{}};
  std::unique_ptr<Communicator> comm = make_sim_communicator(*test::boot(), dev, costs());
  int peer = 1 - comm->rank();
  Stream cs = dev.comm_stream();
  // The seconds `call` moved this rank's clock.
  template <class Call>
  double charged(Call&& call) {
    const double t0 = dev.clock().now();
    call();
    return dev.clock().now() - t0;
  }
};

TEST(SimComm, EachCallPaysItsTransportsCostPerCallAndPerByte) {
  if (test::boot()->size() != 2) GTEST_SKIP() << "two ranks";
  Ranks r;
  std::vector<char> a(4096), b(4096);
  const SimTransport t = costs();
  // NCCL's send and receive: each side pays for the message.
  const double p2p = r.charged([&] {
    if (r.comm->rank() == 0) r.comm->send(a.data(), 1000, r.peer, r.cs);
    else r.comm->recv(b.data(), 1000, r.peer, r.cs);
  });
  EXPECT_DOUBLE_EQ(p2p, t.nccl_p2p.seconds(1000));
  // A group: one call, for the more of what the rank sends and receives in it.
  const double group = r.charged([&] {
    r.comm->group_start();
    r.comm->send(a.data(), r.comm->rank() == 0 ? 3000 : 1000, r.peer, r.cs);
    r.comm->recv(b.data(), r.comm->rank() == 0 ? 1000 : 3000, r.peer, r.cs);
    r.comm->group_end();
  });
  EXPECT_DOUBLE_EQ(group, t.nccl_group.seconds(3000));
  // The all-gather: its own piece, here above the split (the second line).
  const double ag = r.charged([&] { r.comm->all_gather(a.data(), b.data(), 500, r.cs); });
  EXPECT_DOUBLE_EQ(ag, 30 + 1e-2 * 500);
  // The all-to-all: its piece per peer.
  const double a2a = r.charged([&] { r.comm->all_to_all(a.data(), b.data(), 200, r.cs); });
  EXPECT_DOUBLE_EQ(a2a, t.nccl_alltoall.seconds(200));
  // The all-reduce: its piece (a P-th of its buffer, what each of its ring's steps passes); a barrier, no bytes.
  std::vector<float> x(10, 1.f);
  const double ar = r.charged([&] { r.comm->all_reduce_sum(x.data(), x.size(), r.cs); });
  EXPECT_DOUBLE_EQ(ar, t.nccl_allreduce.seconds(20));
  EXPECT_DOUBLE_EQ(r.charged([&] { r.comm->barrier(r.cs); }), t.nccl_allreduce.seconds(0));
}

TEST(SimComm, TheDeviceTransportPaysItsStartOnceACallAndEachBlock) {
  if (test::boot()->size() != 2) GTEST_SKIP() << "two ranks";
  Ranks r;
  r.dev.set_device_transport(true);
  std::vector<char> a(4096), b(4096);
  const double chain = r.charged([&] {
    if (r.comm->rank() == 0) {
      r.dev.fill_zero(a.data(), 64, r.cs);  // the chain's first rank: a kernel of its own before its first block
      for (int k = 0; k < 3; ++k) r.comm->send(a.data() + 64 * k, 64, r.peer, r.cs);
    } else {
      for (int k = 0; k < 3; ++k) r.comm->recv(b.data() + 64 * k, 64, r.peer, r.cs);
    }
  });
  const double fill = 64 / SimGpu{}.copy_Bps;
  // The sender: the kernel, the start once and a handshake a block; the receiver's flag waits cost nothing.
  if (r.comm->rank() == 0) EXPECT_NEAR(chain, fill + 6 + 3 * 0.5, 1e-9);
  else EXPECT_DOUBLE_EQ(chain, 0);
}

// A clock moved by hand on a platform whose every route takes `hop_s` (the ring's hops among them).
class HopClock final : public SimClock {
 public:
  explicit HopClock(double hop_s) : hop_s_(hop_s) {}
  double now() override { return t_; }
  void advance_to(double t) override { t_ = std::max(t_, t); }
  void* shared_alloc(size_t bytes) override { return std::calloc(1, bytes ? bytes : 1); }
  void shared_free(void* p) override { std::free(p); }
  double route_latency_s(const std::string&) override { return hop_s_; }

 private:
  double t_ = 0, hop_s_;
};

TEST(SimComm, TheRingPaysEveryStepsLatencyBesidesItsCost) {
  if (test::boot()->size() != 2) GTEST_SKIP() << "two ranks";
  SimDevice dev(std::make_unique<HopClock>(0.25), SimGpu{});
  std::unique_ptr<Communicator> comm = make_sim_communicator(*test::boot(), dev, costs());
  const SimTransport t = costs();
  std::vector<float> x(10, 1.f);
  auto charged = [&](auto&& call) {
    const double t0 = dev.clock().now();
    call();
    return dev.clock().now() - t0;
  };
  // Here MPI moves the bytes in no time: the all-reduce's 2 (P - 1) = 2 steps pay the cost and one more hop (the
  // first step's is the messages' own), the reduce-scatter's P - 1 = 1 step the cost alone.
  EXPECT_DOUBLE_EQ(charged([&] { comm->all_reduce_sum(x.data(), x.size(), dev.comm_stream()); }),
                   t.nccl_allreduce.seconds(20) + 0.25);
  EXPECT_DOUBLE_EQ(charged([&] { comm->reduce_scatter_sum(x.data(), x.size() / 2, dev.comm_stream()); }),
                   t.nccl_allreduce.seconds(20));
}

}  // namespace
}  // namespace spb

SPB_MPI_TEST_MAIN()
