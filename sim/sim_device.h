// The simulated GPU (DESIGN §10, backend `sim`): no data and no arithmetic, only time.
//
// Each stream is a clock: a kernel starts once the stream's earlier work is done and the host has enqueued it, and
// lasts what the GPU stage took at that shape (sim/sim_kernels.cpp reads it from the stage table); events take the
// time their stream reaches them, and a stream that waits for an event moves to that time. The host enqueues ahead
// of the GPU, as on a real one: its own time (the rank's clock in the simulation) moves only where it waits, that is
// at synchronize() and in the communicator, which runs each operation in the simulation when its stream reaches it
// (host_reaches) and lets the stream go on from where it ended (stream_done_now). So a collective on the
// communication stream overlaps the compute stream's kernels exactly as the GPU's streams overlap them.
//
// Buffers come from the simulation's shared memory (SMPI_SHARED_MALLOC, sim/sim_smpi.cpp), so 256 ranks of the
// paper's shapes fit in a few GiB and messages carry no payload; uploads and downloads do nothing.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/device.h"

namespace spb {

// The rank's clock in the simulation: SMPI's (sim/sim_smpi.cpp), or one a test moves by hand.
class SimClock {
 public:
  virtual ~SimClock() = default;
  virtual double now() = 0;                     // seconds
  virtual void advance_to(double t) = 0;        // spends simulated time until t (nothing where now() >= t)
  virtual void* shared_alloc(size_t bytes) = 0;  // memory whose contents do not matter (it may be another's too)
  virtual void shared_free(void* p) = 0;
  // The platform's latency from this rank's host to the host named `to` (MPI_Get_processor_name's name in the
  // simulation); 0 on a clock moved by hand, whose messages take no time.
  virtual double route_latency_s(const std::string& /*to*/) { return 0; }
};
std::unique_ptr<SimClock> make_manual_clock();  // now() moves only by advance_to; plain heap memory

// What a simulated GPU costs besides its stages (the calibration file: sim/sim_runtime.h).
struct SimGpu {
  std::string name = "simulated GPU";
  double copy_Bps = 4.3e12;  // device-to-device copy, bytes read plus written per second
  // Added to every stage's recorded time (clamped at 0): the launch gaps between kernels where positive; where
  // negative, the recorder's own events, which bracket each stage on the GPU and lengthen what they measure.
  double stage_offset_s = 0;
};

class SimDevice final : public Device {
 public:
  SimDevice(std::unique_ptr<SimClock> clock, SimGpu gpu);
  ~SimDevice() override;

  // A kernel of `seconds` on stream s.
  void run_kernel(Stream s, double seconds);
  // A host-driven operation on stream s: the host waits until the stream has reached it (advance_to) before the
  // caller runs it in the simulation; afterwards the stream goes on from the clock's time.
  void host_reaches(Stream s);
  void stream_done_now(Stream s);
  double stream_time(Stream s) const;
  SimClock& clock() { return *clock_; }
  const SimGpu& gpu() const { return gpu_; }
  // Whether point-to-point operations stand for the device All-Scan's peer writes (its fold then inside the
  // transport), or NCCL's sends: set for the run of the method or pattern whose All-Scan is a device protocol, and by
  // the rail All-Scan around its step inside each node.
  bool device_transport() const { return device_transport_; }
  // Whether the last operation on stream s was a kernel (not a communication call): a device-transport send that
  // follows one starts an All-Scan call on the first rank of its chain (sim/sim_comm.cpp).
  bool after_kernel(Stream s) const { return after_kernel_[index(s)]; }
  void set_device_transport(bool on) override { device_transport_ = on; }

  std::string name() const override { return gpu_.name + " (simulated)"; }
  bool is_gpu() const override { return false; }  // no CUDA path may run: the methods take their host-driven one
  void* alloc(size_t bytes) override;
  void free(void* p) override;
  void upload(void*, const void*, size_t) override {}
  void download(void* host_dst, const void*, size_t bytes) override;
  void copy(void*, const void*, size_t bytes, Stream s) override { run_kernel(s, 2.0 * double(bytes) / gpu_.copy_Bps); }
  void fill_zero(void*, size_t bytes, Stream s) override { run_kernel(s, double(bytes) / gpu_.copy_Bps); }
  void upload_as(void*, DType, const float*, size_t) override {}
  void download_as(float* host_dst, const void*, DType, size_t n) override;
  Stream compute_stream() override { return stream_of(0); }
  Stream comm_stream() override { return stream_of(1); }
  Stream second_compute_stream() override { return stream_of(2); }
  Event create_event(EventUse use) override;
  void destroy_event(Event e) override;
  void record(Event e, Stream s) override;
  void wait(Stream s, Event e) override;
  void synchronize() override;
  double elapsed_ms(Event start, Event stop) override;
  size_t free_memory_bytes() override { return size_t(1) << 50; }
  size_t used_memory_bytes() override { return 0; }

 private:
  static Stream stream_of(int i) { return Stream{reinterpret_cast<void*>(intptr_t(i + 1))}; }
  int index(Stream s) const;
  // The host's time for what it enqueues now: the clock's, unless the communicator has run operations since the
  // last synchronize (the host then enqueued ahead of them, at the time it had reached).
  double host_time();

  std::unique_ptr<SimClock> clock_;
  SimGpu gpu_;
  double ready_[3] = {0, 0, 0};
  bool after_kernel_[3] = {false, false, false};
  double host_ = 0;
  bool comm_since_sync_ = false;
  bool device_transport_ = false;
  std::vector<double> events_;
  std::vector<size_t> free_events_;
};

}  // namespace spb
