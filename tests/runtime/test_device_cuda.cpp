// The GPU device keeps Device's promises: upload and download are synchronous, so work enqueued on any stream after
// an upload reads what was uploaded (the model uploads each step's tokens, then embeds them on the compute stream).
// Skips itself where there is no CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "runtime/device.h"
#include "../gpu_test_util.h"

namespace spb {
namespace {

// Each round uploads a new value into a buffer that holds the last round's, and copies it at once on a stream: a
// copy that ran before the upload had landed would bring back the last round's value (pageable host memory, 8 MiB:
// cudaMemcpy stages it and returns before the last of it has reached the GPU).
TEST(DeviceCuda, WorkOnAStreamAfterAnUploadSeesTheUpload) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  auto dev = make_cuda_device(0);
  constexpr size_t n = size_t(2) << 20;
  void* buf = dev->alloc(n * 4);
  void* got = dev->alloc(n * 4);
  std::vector<uint32_t> host(n), back(n);
  for (const Stream st : {dev->compute_stream(), dev->comm_stream(), dev->second_compute_stream()}) {
    for (uint32_t round = 1; round <= 20; ++round) {
      for (size_t i = 0; i < n; ++i) host[i] = round * 0x01000193u + uint32_t(i);
      dev->upload(buf, host.data(), n * 4);
      dev->copy(got, buf, n * 4, st);
      dev->download(back.data(), got, n * 4);
      size_t stale = 0;
      for (size_t i = 0; i < n; ++i) stale += back[i] != host[i];
      ASSERT_EQ(stale, 0u) << "round " << round << ": " << stale << " of " << n << " words not the uploaded ones";
    }
  }
  dev->free(buf);
  dev->free(got);
}

// download after work on a stream returns that work's result, not what the buffer held before it.
TEST(DeviceCuda, DownloadWaitsForTheStreams) {
  if (!test::have_gpu()) GTEST_SKIP() << "no CUDA device";
  auto dev = make_cuda_device(0);
  constexpr size_t n = size_t(2) << 20;
  void* buf = dev->alloc(n * 4);
  std::vector<uint32_t> ones(n, 1u), back(n);
  for (const Stream st : {dev->compute_stream(), dev->comm_stream(), dev->second_compute_stream()}) {
    dev->upload(buf, ones.data(), n * 4);
    dev->fill_zero(buf, n * 4, st);
    dev->download(back.data(), buf, n * 4);
    size_t nonzero = 0;
    for (uint32_t x : back) nonzero += x != 0;
    EXPECT_EQ(nonzero, 0u);
  }
  dev->free(buf);
}

}  // namespace
}  // namespace spb
