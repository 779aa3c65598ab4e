// main() for GoogleTest programs run under mpirun: MPI up before the tests, one rank prints, and the exit code is the
// worst over ranks (a failure on any rank fails the test).
#pragma once

#include <gtest/gtest.h>

#include "runtime/bootstrap.h"

#include <cstdio>
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

inline void print_failures_only_on_other_ranks(int rank) {
  if (rank == 0) return;
  auto& l = testing::UnitTest::GetInstance()->listeners();
  delete l.Release(l.default_result_printer());
  l.Append(new RankFailurePrinter(rank));
}
}  // namespace spb::test

#define SPB_MPI_TEST_MAIN()                                                                  \
  int main(int argc, char** argv) {                                                          \
    spb::Bootstrap boot(&argc, &argv);                                                       \
    spb::test::boot() = &boot;                                                               \
    testing::InitGoogleTest(&argc, argv);                                                    \
    spb::test::print_failures_only_on_other_ranks(boot.rank());                              \
    const int rc = RUN_ALL_TESTS();                                                          \
    return int(boot.max(rc));                                                                \
  }
