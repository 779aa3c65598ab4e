// Checks of a Communicator that hold on every backend (buffers through the Device interface): the NCCL test runs them
// on GPUs, the MPI test on CPU ranks.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "runtime/communicator.h"
#include "runtime/device.h"

namespace spb::test {

// A value no two (rank, index, salt) share, exactly representable in fp32.
inline float tagv(int rank, size_t i, int salt) {
  return float(rank * 100000 + int(i % 50000)) + 0.25f * float(salt % 4);
}

inline std::vector<float> fill(int rank, size_t n, int salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = tagv(rank, i, salt);
  return v;
}

inline std::vector<float> download(Device& dev, const Buffer& b, size_t n) {
  std::vector<float> v(n);
  dev.download(v.data(), b.get(), n * 4);
  return v;
}

// reduce_scatter_sum in place: rank q's element i is (q + 1) x (i mod 977), so block p of the sum is P (P + 1) / 2 x
// (i mod 977) over its global indices i, exact in fp32; the other blocks keep this rank's own values.
inline void check_reduce_scatter_sum(Device& dev, Communicator& comm) {
  const int p = comm.rank(), P = comm.size();
  for (size_t n : {size_t(1), size_t(1000), size_t(1) << 18}) {
    std::vector<float> mine(n * size_t(P));
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = float(p + 1) * float(i % 977);
    Buffer b(dev, mine.size() * 4);
    dev.upload(b.get(), mine.data(), mine.size() * 4);
    comm.reduce_scatter_sum(b.f32(), n, dev.compute_stream());
    dev.synchronize();
    const std::vector<float> got = download(dev, b, mine.size());
    size_t wrong = 0, touched = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (i / n == size_t(p)) wrong += got[i] != float(P * (P + 1) / 2) * float(i % 977);
      else touched += got[i] != mine[i];
    }
    EXPECT_EQ(wrong, 0u) << "n=" << n << ": elements of block " << p << " that are not the sum over the ranks";
    EXPECT_EQ(touched, 0u) << "n=" << n << ": elements of the other blocks changed";
  }
}

// all_gather in place (send = recv + rank x bytes): every block of recv is its rank's, the others' -1 overwritten.
inline void check_all_gather_in_place(Device& dev, Communicator& comm) {
  const int p = comm.rank(), P = comm.size();
  for (size_t n : {size_t(1), size_t(1000), size_t(1) << 18}) {
    std::vector<float> start(n * size_t(P), -1.0f);
    const std::vector<float> own = fill(p, n, 5);
    std::copy(own.begin(), own.end(), start.begin() + long(size_t(p) * n));
    Buffer b(dev, start.size() * 4);
    dev.upload(b.get(), start.data(), start.size() * 4);
    comm.all_gather(b.f32() + size_t(p) * n, b.get(), n * 4, dev.compute_stream());
    dev.synchronize();
    std::vector<float> want;
    for (int q = 0; q < P; ++q) {
      const auto v = fill(q, n, 5);
      want.insert(want.end(), v.begin(), v.end());
    }
    EXPECT_EQ(download(dev, b, n * size_t(P)), want) << "n=" << n;
  }
}

}  // namespace spb::test
