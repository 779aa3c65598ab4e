// main() for GoogleTest programs run under mpirun: MPI up before the tests, one rank prints, and the exit code is the
// worst over ranks (a failure on any rank fails the test). A GPU test (a GPU program, or a CPU/GPU one under
// SPB_TEST_BACKEND=gpu) where some rank lacks its GPU, or where every test skipped itself on every rank, exits 77 on
// every rank, which mpirun passes on and ctest counts as skipped (tests/gpu_test_skip.h).
#pragma once

#include <gtest/gtest.h>

#include "gpu_test_skip.h"
#include "runtime/bootstrap.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#ifdef SPB_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace spb::test {
inline Bootstrap*& boot() {
  static Bootstrap* b = nullptr;
  return b;
}

// Non-zero ranks print only failures, tagged with the rank (rank 0 keeps GoogleTest's own printer).
class RankFailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] FAILED %s:%d\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

// Whether every node has a GPU for each of its ranks, agreed by all ranks (false in a build without CUDA).
inline bool gpus_for_every_local_rank(const Bootstrap& b) {
  int n = 0;
#ifdef SPB_HAVE_CUDA
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
#endif
  return b.all(n > 0 && n >= b.local_size());
}

// Whether the tests run on GPUs (SPB_TEST_BACKEND=gpu), for the programs that test either backend.
inline bool gpu_backend_requested() {
  const char* b = std::getenv("SPB_TEST_BACKEND");
  return b && std::string(b) == "gpu";
}

// The exit code every rank returns, agreed by all: see gpu_test_exit_code (tests/gpu_test_skip.h).
inline int agreed_gpu_test_exit_code(const Bootstrap& b, int rc, bool gpus_for_every_rank) {
  const bool passed = b.all(rc == 0);
  const bool all_skipped = b.all(every_test_skipped());
  return gpu_test_exit_code(passed, gpus_for_every_rank, all_skipped);
}

inline void print_failures_only_on_other_ranks(int rank) {
  if (rank == 0) return;
  auto& l = testing::UnitTest::GetInstance()->listeners();
  delete l.Release(l.default_result_printer());
  l.Append(new RankFailurePrinter(rank));
}

// The body of main() for GPU tests under mpirun: `setup` where every rank has a GPU (else the tests skip
// themselves), the tests, then `teardown` (collective resources before the communicator); an exception on a rank
// aborts the world, naming the rank. Exit code 1 where any rank failed, 77 where the GPUs were not there.
template <class Setup, class Teardown>
int run_gpu_mpi_tests(int* argc, char** argv, Bootstrap& boot, Setup setup, Teardown teardown) {
  testing::InitGoogleTest(argc, argv);
  print_failures_only_on_other_ranks(boot.rank());
  int rc = 0;
  const bool gpus = gpus_for_every_local_rank(boot);
  try {
    if (gpus) setup();
    else if (boot.rank() == 0) std::printf("no GPU, or fewer GPUs than ranks on a node: GPU tests skip\n");
    rc = RUN_ALL_TESTS();
    teardown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] %s\n", boot.rank(), e.what());
    boot.abort(1);
  }
  return agreed_gpu_test_exit_code(boot, rc, gpus);
}
}  // namespace spb::test

#define SPB_MPI_TEST_MAIN()                                                                    \
  int main(int argc, char** argv) {                                                            \
    spb::Bootstrap boot(&argc, &argv);                                                         \
    spb::test::boot() = &boot;                                                                 \
    testing::InitGoogleTest(&argc, argv);                                                      \
    spb::test::print_failures_only_on_other_ranks(boot.rank());                                \
    const int rc = RUN_ALL_TESTS();                                                            \
    if (!spb::test::gpu_backend_requested()) return int(boot.max(rc));                         \
    const bool gpus = spb::test::gpus_for_every_local_rank(boot);                              \
    return spb::test::agreed_gpu_test_exit_code(boot, rc, gpus);                               \
  }
