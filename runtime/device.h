// The place where tensors live and work runs: host memory on a CPU rank, one GPU on a GPU rank.
// SP methods only see this interface, so one method body serves both. On the CPU every call completes before it
// returns and streams/events are no-ops; on a GPU, work is enqueued on streams and ordered with events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace spb {

enum class DType { f32, bf16 };
size_t dtype_size(DType t);
const char* dtype_name(DType t);

// Opaque handles: cudaStream_t / cudaEvent_t on a GPU, nullptr on the CPU.
struct Stream {
  void* handle = nullptr;
};
struct Event {
  void* handle = nullptr;
};
enum class EventUse { timing, order };

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;  // "cpu" or the GPU's name
  virtual bool is_gpu() const = 0;

  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* p) = 0;
  virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;    // synchronous
  virtual void download(void* host_dst, const void* src, size_t bytes) = 0;  // synchronous
  virtual void copy(void* dst, const void* src, size_t bytes, Stream s) = 0;
  virtual void fill_zero(void* p, size_t bytes, Stream s) = 0;

  // Host float32 <-> device activations of dtype `t` (bf16 rounding on the GPU).
  virtual void upload_as(void* dst, DType t, const float* host_src, size_t n) = 0;
  virtual void download_as(float* host_dst, const void* src, DType t, size_t n) = 0;

  virtual Stream compute_stream() = 0;
  virtual Stream comm_stream() = 0;
  // A second compute stream, for work that may run beside the compute stream's (zeco's head groups).
  virtual Stream second_compute_stream() = 0;
  // `order` events only order streams (no timestamp: on the GPU a cheaper record and wait); `timing` ones can also
  // be passed to elapsed_ms.
  virtual Event create_event(EventUse use = EventUse::timing) = 0;
  virtual void destroy_event(Event e) = 0;
  virtual void record(Event e, Stream s) = 0;
  virtual void wait(Stream s, Event e) = 0;  // s waits for e
  virtual void synchronize() = 0;            // host waits for every stream
  // Milliseconds between two recorded events (host wall clock on the CPU).
  virtual double elapsed_ms(Event start, Event stop) = 0;
  // Bytes that could still be allocated, and bytes in use: on a GPU as the driver counts them (every process and
  // library on it, the context included), on the CPU this process's resident memory and the host's available memory.
  virtual size_t free_memory_bytes() = 0;
  virtual size_t used_memory_bytes() = 0;
  // Whether the host-driven point-to-point chain that follows stands for the device All-Scan's kernel (its sends
  // peer writes, its folds inside the kernel): the rail All-Scan's step inside a node, where no GPU runs it. Only the
  // simulated device charges the difference (sim/sim_device.h); every other device ignores it.
  virtual void set_device_transport(bool on) { (void)on; }
};

// A device allocation that frees itself, or a view of one that another Buffer owns (borrowed).
class Buffer {
 public:
  Buffer() = default;
  Buffer(Device& dev, size_t bytes) : dev_(&dev), bytes_(bytes), ptr_(bytes ? dev.alloc(bytes) : nullptr) {}
  // The memory of `owner`, freed by owner alone: the view must not outlive it.
  static Buffer borrowed(const Buffer& owner) {
    Buffer b;
    b.bytes_ = owner.bytes_, b.ptr_ = owner.ptr_;
    return b;
  }
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      dev_ = o.dev_, bytes_ = o.bytes_, ptr_ = o.ptr_;
      o.ptr_ = nullptr, o.bytes_ = 0;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* get() const { return ptr_; }
  float* f32() const { return static_cast<float*>(ptr_); }
  size_t bytes() const { return bytes_; }
  bool owns() const { return dev_ != nullptr; }
  void reset() {
    if (ptr_ && dev_) dev_->free(ptr_);
    ptr_ = nullptr, bytes_ = 0;
  }

 private:
  Device* dev_ = nullptr;
  size_t bytes_ = 0;
  void* ptr_ = nullptr;
};

std::unique_ptr<Device> make_cpu_device();

}  // namespace spb

namespace spb {
#ifdef SPB_HAVE_CUDA
// One GPU (by CUDA ordinal), with two compute streams and a communication stream (runtime/device_cuda.cu).
std::unique_ptr<Device> make_cuda_device(int ordinal);
#endif
}  // namespace spb

namespace spb {
// A device event that destroys itself.
class EventHandle {
 public:
  explicit EventHandle(Device& dev, EventUse use = EventUse::timing) : dev_(dev), e_(dev.create_event(use)) {}
  ~EventHandle() { dev_.destroy_event(e_); }
  EventHandle(const EventHandle&) = delete;
  EventHandle& operator=(const EventHandle&) = delete;
  Event get() const { return e_; }

 private:
  Device& dev_;
  Event e_;
};
}  // namespace spb
