// main() of the single-process GPU tests: GoogleTest's, but a run without a GPU, or one where every test skipped
// itself, exits kSkipExitCode (tests/gpu_test_skip.h), which ctest counts as skipped.
#include <gtest/gtest.h>

#include "gpu_test_skip.h"
#include "gpu_test_util.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  return spb::test::gpu_test_exit_code(rc == 0, spb::test::have_gpu(), spb::test::every_test_skipped());
}
