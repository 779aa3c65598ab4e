// The CPU "device": host memory, synchronous work, wall-clock events.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "runtime/device.h"
#include "runtime/error.h"

namespace spb {

size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }
const char* dtype_name(DType t) { return t == DType::f32 ? "fp32" : "bf16"; }

namespace {

using Clock = std::chrono::steady_clock;

class CpuDevice final : public Device {
 public:
  std::string name() const override { return "cpu"; }
  bool is_gpu() const override { return false; }

  void* alloc(size_t bytes) override {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void free(void* p) override { std::free(p); }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes, Stream) override { std::memmove(dst, src, bytes); }
  void fill_zero(void* p, size_t bytes, Stream) override { std::memset(p, 0, bytes); }

  void upload_as(void* dst, DType t, const float* src, size_t n) override {
    SPB_CHECK(t == DType::f32, "the CPU device holds activations in fp32");
    std::memcpy(dst, src, n * sizeof(float));
  }
  void download_as(float* dst, const void* src, DType t, size_t n) override {
    SPB_CHECK(t == DType::f32, "the CPU device holds activations in fp32");
    std::memcpy(dst, src, n * sizeof(float));
  }

  Stream compute_stream() override { return {}; }
  Stream comm_stream() override { return {}; }
  Stream second_compute_stream() override { return {}; }
  Event create_event(EventUse) override { return {new Clock::time_point()}; }
  void destroy_event(Event e) override { delete static_cast<Clock::time_point*>(e.handle); }
  void record(Event e, Stream) override { *static_cast<Clock::time_point*>(e.handle) = Clock::now(); }
  void wait(Stream, Event) override {}
  void synchronize() override {}
  double elapsed_ms(Event a, Event b) override {
    auto ta = *static_cast<Clock::time_point*>(a.handle), tb = *static_cast<Clock::time_point*>(b.handle);
    return std::chrono::duration<double, std::milli>(tb - ta).count();
  }
  size_t free_memory_bytes() override { return size_t(sysconf(_SC_AVPHYS_PAGES)) * size_t(sysconf(_SC_PAGESIZE)); }
  size_t used_memory_bytes() override {
    long pages = 0, resident = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
      std::fclose(f);
    }
    return size_t(resident) * size_t(sysconf(_SC_PAGESIZE));
  }
};

}  // namespace

std::unique_ptr<Device> make_cpu_device() { return std::make_unique<CpuDevice>(); }

}  // namespace spb
