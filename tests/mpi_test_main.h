// main() for GoogleTest programs run under mpirun: MPI up before the tests, one rank prints, and the exit code is the
// worst over ranks (a failure on any rank fails the test).
#pragma once

#include <gtest/gtest.h>

#include "harness/bootstrap.h"

namespace spb::test {
inline Bootstrap*& boot() {
  static Bootstrap* b = nullptr;
  return b;
}
}  // namespace spb::test

#define SPB_MPI_TEST_MAIN()                                                                  \
  int main(int argc, char** argv) {                                                          \
    spb::Bootstrap boot(&argc, &argv);                                                       \
    spb::test::boot() = &boot;                                                               \
    testing::InitGoogleTest(&argc, argv);                                                    \
    if (boot.rank() != 0) {                                                                  \
      auto& l = testing::UnitTest::GetInstance()->listeners();                               \
      delete l.Release(l.default_result_printer());                                          \
    }                                                                                        \
    const int rc = RUN_ALL_TESTS();                                                          \
    return int(boot.max(rc));                                                                \
  }
