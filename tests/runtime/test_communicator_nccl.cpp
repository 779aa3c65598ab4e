// The NCCL communicator on device buffers: a send/recv ring in a group, lone send/recv pairs, all_gather (and in
// place), the in-place reduce-scatter, all_to_all (alone and inside a group), barrier, and back-to-back use on two
// streams. Run under mpirun with one GPU per rank (local rank = GPU ordinal); skips itself when the node has fewer
// GPUs than ranks on it.
#include "../mpi_test_main.h"
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "runtime/bootstrap.h"
#include "runtime/communicator.h"
#include "runtime/watchdog.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "communicator_checks.h"

namespace spb {
namespace {

Bootstrap* g_boot = nullptr;
std::unique_ptr<Device> g_dev;
std::unique_ptr<Communicator> g_comm;

#define SKIP_IF_NO_GPU() \
  if (!g_comm) GTEST_SKIP() << "fewer GPUs than ranks on this node, or no GPU"

using test::fill;
using test::tagv;

std::vector<float> download(const Buffer& b, size_t n) { return test::download(*g_dev, b, n); }

TEST(CommunicatorNccl, Identity) {
  SKIP_IF_NO_GPU();
  EXPECT_EQ(g_comm->name(), "nccl");
  EXPECT_EQ(g_comm->rank(), g_boot->rank());
  EXPECT_EQ(g_comm->size(), g_boot->size());
  EXPECT_NE(g_comm->native_handle(), nullptr);
}

TEST(CommunicatorNccl, RingInAGroup) {
  SKIP_IF_NO_GPU();
  const int p = g_comm->rank(), P = g_comm->size();
  if (P < 2) GTEST_SKIP() << "needs two ranks";
  const size_t n = 1 << 16;
  Buffer s(*g_dev, n * 4), r(*g_dev, n * 4);
  const auto mine = fill(p, n, 1);
  g_dev->upload(s.get(), mine.data(), n * 4);
  const Stream st = g_dev->compute_stream();
  // Several steps of a ring: each step forwards what arrived in the previous one.
  int have = p;
  for (int step = 0; step < P; ++step) {
    g_comm->group_start();
    g_comm->send(s.get(), n * 4, (p + 1) % P, st);
    g_comm->recv(r.get(), n * 4, (p - 1 + P) % P, st);
    g_comm->group_end();
    g_dev->copy(s.get(), r.get(), n * 4, st);
    have = (have - 1 + P) % P;
  }
  g_dev->synchronize();
  EXPECT_EQ(have, p);  // after P steps every block is home again
  EXPECT_EQ(download(s, n), mine);
}

TEST(CommunicatorNccl, LoneSendRecvPairs) {
  SKIP_IF_NO_GPU();
  const int p = g_comm->rank(), P = g_comm->size();
  if (P < 2) GTEST_SKIP() << "needs two ranks";
  const size_t n = 4099;  // not a multiple of anything
  Buffer b(*g_dev, n * 4);
  const Stream st = g_dev->comm_stream();
  // Even ranks send to the next odd rank, which receives: outside a group, each call stands alone.
  if (p % 2 == 0 && p + 1 < P) {
    const auto v = fill(p, n, 2);
    g_dev->upload(b.get(), v.data(), n * 4);
    g_comm->send(b.get(), n * 4, p + 1, st);
    g_comm->send(b.get(), n * 4, p + 1, st);  // twice: ordered on the stream
  } else if (p % 2 == 1) {
    Buffer b2(*g_dev, n * 4);
    g_comm->recv(b.get(), n * 4, p - 1, st);
    g_comm->recv(b2.get(), n * 4, p - 1, st);
    g_dev->synchronize();
    EXPECT_EQ(download(b, n), fill(p - 1, n, 2));
    EXPECT_EQ(download(b2, n), fill(p - 1, n, 2));
  }
  g_dev->synchronize();
  g_boot->barrier();
}

TEST(CommunicatorNccl, AllGather) {
  SKIP_IF_NO_GPU();
  const int p = g_comm->rank(), P = g_comm->size();
  for (size_t n : {size_t(1), size_t(1000), size_t(1) << 18}) {
    Buffer s(*g_dev, n * 4), r(*g_dev, n * 4 * P);
    g_dev->upload(s.get(), fill(p, n, 3).data(), n * 4);
    g_comm->all_gather(s.get(), r.get(), n * 4, g_dev->compute_stream());
    g_dev->synchronize();
    std::vector<float> want;
    for (int q = 0; q < P; ++q) {
      const auto v = fill(q, n, 3);
      want.insert(want.end(), v.begin(), v.end());
    }
    EXPECT_EQ(download(r, n * P), want) << "n=" << n;
  }
}

TEST(CommunicatorNccl, AllGatherInPlace) {
  SKIP_IF_NO_GPU();
  test::check_all_gather_in_place(*g_dev, *g_comm);
}

TEST(CommunicatorNccl, ReduceScatterSumInPlace) {
  SKIP_IF_NO_GPU();
  test::check_reduce_scatter_sum(*g_dev, *g_comm);
}

// Block j of rank q's send buffer holds tagv(q, j * n + i): rank p must receive block p of every rank.
void check_all_to_all(bool in_group) {
  const int p = g_comm->rank(), P = g_comm->size();
  const size_t n = 3001;
  Buffer s(*g_dev, n * 4 * P), r(*g_dev, n * 4 * P);
  g_dev->upload(s.get(), fill(p, n * P, 4).data(), n * 4 * P);
  if (in_group) g_comm->group_start();
  g_comm->all_to_all(s.get(), r.get(), n * 4, g_dev->compute_stream());
  if (in_group) g_comm->group_end();
  g_dev->synchronize();
  std::vector<float> want;
  for (int q = 0; q < P; ++q) {
    const auto v = fill(q, n * P, 4);
    want.insert(want.end(), v.begin() + long(p * n), v.begin() + long((p + 1) * n));
  }
  EXPECT_EQ(download(r, n * P), want) << (in_group ? "inside a group" : "alone");
}

TEST(CommunicatorNccl, AllToAll) {
  SKIP_IF_NO_GPU();
  check_all_to_all(false);
  check_all_to_all(true);
}

TEST(CommunicatorNccl, BarrierAndTwoStreams) {
  SKIP_IF_NO_GPU();
  const int p = g_comm->rank(), P = g_comm->size();
  const size_t n = 1 << 12;
  Buffer s(*g_dev, n * 4), r(*g_dev, n * 4 * P);
  for (int it = 0; it < 20; ++it) {
    const Stream st = it % 2 ? g_dev->comm_stream() : g_dev->compute_stream();
    g_dev->upload(s.get(), fill(p, n, it).data(), n * 4);
    g_comm->barrier(st);
    g_comm->all_gather(s.get(), r.get(), n * 4, st);
    g_dev->synchronize();
    const auto got = download(r, n * P);
    for (int q = 0; q < P; ++q)
      ASSERT_EQ(got[size_t(q) * n + 7], tagv(q, 7, it)) << "iteration " << it << " block " << q;
  }
  g_comm->barrier(Stream{});
  g_dev->synchronize();
}

TEST(CommunicatorNccl, EmptyGroupAndBadPeer) {
  SKIP_IF_NO_GPU();
  g_comm->group_start();
  g_comm->group_end();
  Buffer b(*g_dev, 16);
  EXPECT_THROW(g_comm->send(b.get(), 16, g_comm->size(), Stream{}), Error);
  EXPECT_THROW(g_comm->recv(b.get(), 16, g_comm->rank(), Stream{}), Error);
  EXPECT_THROW(g_comm->group_end(), Error);
}

// Fault injection, disabled by default because the watchdog ends the process. Run each alone, e.g.
//   SPB_TIMEOUT_S=3 mpirun -np 2 test_communicator_nccl --gtest_also_run_disabled_tests \
//       --gtest_filter='*MissingPeerFirstContact'
// Rank 0 never sends what rank 1 waits for. On first contact the connection never completes: with the default
// (blocking) communicator the process watchdog prints "spbench: error: rank 1 waited 3 s in NCCL recv (1024 bytes),
// blocking the host, for rank(s) 0 ..." and ends the job with status 2; with SPB_NCCL_NONBLOCKING=1 the recv throws
// an Error naming rank 0 and the test passes.
TEST(CommunicatorNccl, DISABLED_MissingPeerFirstContact) {
  SKIP_IF_NO_GPU();
  const int p = g_comm->rank();
  Buffer b(*g_dev, 1024);
  if (p == 1) {
    std::string msg;
    try {
      g_comm->recv(b.get(), 1024, 0, Stream{});
      g_dev->synchronize();
    } catch (const Error& e) {
      msg = e.what();
    }
    std::printf("[fault] rank 1: %s\n", msg.c_str());
    EXPECT_NE(msg.find("0 did not arrive"), std::string::npos) << msg;
  }
  g_boot->barrier();
}

// After one good exchange (the connection exists), rank 1 waits on the GPU for a second message that never comes:
// only the watchdog can see that. Expected: "spbench: error: rank 1 waited 3 s in NCCL recv (1024 bytes), on the
// GPU, for rank(s) 0 ..." and exit status 2.
TEST(CommunicatorNccl, DISABLED_MissingPeerOnTheGpu) {
  SKIP_IF_NO_GPU();
  const int p = g_comm->rank();
  Buffer b(*g_dev, 1024);
  if (p == 0) g_comm->send(b.get(), 1024, 1, Stream{});
  if (p == 1) g_comm->recv(b.get(), 1024, 0, Stream{});
  g_dev->synchronize();
  g_boot->barrier();
  if (p == 1) {
    g_comm->recv(b.get(), 1024, 0, Stream{});
    g_dev->synchronize();  // never returns: the watchdog ends the process
  }
  g_boot->barrier();
}


}  // namespace
}  // namespace spb

int main(int argc, char** argv) {
  spb::Bootstrap boot(&argc, &argv);
  spb::g_boot = &boot;
  spb::watchdog_start(boot.rank());  // the communicator's waits are the process watchdog's, as in spbench
  return spb::test::run_gpu_mpi_tests(
      &argc, argv, boot,
      [&] {
        spb::g_dev = spb::make_cuda_device(boot.local_rank());
        spb::g_comm = spb::make_nccl_communicator(boot, *spb::g_dev);
      },
      [] {
        spb::g_comm.reset();
        spb::g_dev.reset();
      });
}
