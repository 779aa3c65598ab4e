// The MPI communicator on CPU ranks: the in-place reduce-scatter and all-gather a sharded optimizer uses, the same
// checks the NCCL test runs on GPUs (communicator_checks.h).
#include "../mpi_test_main.h"
#include <gtest/gtest.h>

#include <memory>

#include "runtime/bootstrap.h"
#include "runtime/communicator.h"
#include "runtime/device.h"
#include "communicator_checks.h"

namespace spb {
namespace {

struct MpiRanks {
  std::unique_ptr<Device> dev = make_cpu_device();
  std::unique_ptr<Communicator> comm = make_mpi_communicator(*test::boot());
};

TEST(CommunicatorMpi, ReduceScatterSumInPlace) {
  MpiRanks r;
  test::check_reduce_scatter_sum(*r.dev, *r.comm);
}

TEST(CommunicatorMpi, AllGatherInPlace) {
  MpiRanks r;
  test::check_all_gather_in_place(*r.dev, *r.comm);
}

}  // namespace
}  // namespace spb

SPB_MPI_TEST_MAIN()
