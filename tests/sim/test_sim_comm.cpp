// The simulated communicator (sim/sim_comm.cpp) on two MPI ranks, each on a clock moved by hand: every call pays its
// transport's cost, per call and per byte of the call, on the rank's clock before its bytes move (here MPI moves
// them in no simulated time, so the clock holds the costs alone).
#include "../mpi_test_main.h"
#include <gtest/gtest.h>

#include <memory>
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
  // The all-reduce: its buffer; a barrier, no bytes.
  std::vector<float> x(10, 1.f);
  const double ar = r.charged([&] { r.comm->all_reduce_sum(x.data(), x.size(), r.cs); });
  EXPECT_DOUBLE_EQ(ar, t.nccl_allreduce.seconds(40));
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

}  // namespace
}  // namespace spb

SPB_MPI_TEST_MAIN()
