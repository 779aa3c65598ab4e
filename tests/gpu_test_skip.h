// How a GPU test that could not run tells ctest so: it exits kSkipExitCode, which tests/CMakeLists.txt gives its
// entries as SKIP_RETURN_CODE, so that ctest's summary counts it as skipped rather than passed.
#pragma once

#include <gtest/gtest.h>

namespace spb::test {

inline constexpr int kSkipExitCode = 77;

// Whether every test this process selected skipped itself (at least one selected, none run).
inline bool every_test_skipped() {
  const testing::UnitTest& u = *testing::UnitTest::GetInstance();
  return u.test_to_run_count() > 0 && u.skipped_test_count() == u.test_to_run_count();
}

// The exit code of a GPU test program: 1 where a test failed; else kSkipExitCode where the GPUs it needs are not
// there or every test skipped itself; else 0. (Where some tests ran, those that skipped themselves leave it passed.)
inline int gpu_test_exit_code(bool passed, bool gpus_here, bool all_skipped) {
  if (!passed) return 1;
  return !gpus_here || all_skipped ? kSkipExitCode : 0;
}

}  // namespace spb::test
