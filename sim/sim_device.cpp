#include "sim/sim_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "runtime/error.h"

namespace spb {

namespace {

class ManualClock final : public SimClock {
 public:
  double now() override { return t_; }
  void advance_to(double t) override { t_ = std::max(t_, t); }
  void* shared_alloc(size_t bytes) override { return std::calloc(1, bytes ? bytes : 1); }
  void shared_free(void* p) override { std::free(p); }

 private:
  double t_ = 0;
};

}  // namespace

std::unique_ptr<SimClock> make_manual_clock() { return std::make_unique<ManualClock>(); }

SimDevice::SimDevice(std::unique_ptr<SimClock> clock, SimGpu gpu) : clock_(std::move(clock)), gpu_(std::move(gpu)) {
  host_ = clock_->now();
  for (double& r : ready_) r = host_;
}

SimDevice::~SimDevice() = default;

int SimDevice::index(Stream s) const {
  const intptr_t i = reinterpret_cast<intptr_t>(s.handle) - 1;
  SPB_CHECK(i >= 0 && i < 3, "not a stream of the simulated device");
  return int(i);
}

double SimDevice::host_time() {
  if (!comm_since_sync_) host_ = std::max(host_, clock_->now());
  return host_;
}

void SimDevice::run_kernel(Stream s, double seconds) {
  double& r = ready_[index(s)];
  r = std::max(r, host_time()) + std::max(0.0, seconds + gpu_.stage_offset_s);
  after_kernel_[index(s)] = true;
}

void SimDevice::host_reaches(Stream s) { clock_->advance_to(std::max(ready_[index(s)], host_time())); }

void SimDevice::stream_done_now(Stream s) {
  ready_[index(s)] = clock_->now();
  after_kernel_[index(s)] = false;
  comm_since_sync_ = true;
}

double SimDevice::stream_time(Stream s) const { return ready_[index(s)]; }

void* SimDevice::alloc(size_t bytes) { return clock_->shared_alloc(bytes); }
void SimDevice::free(void* p) { clock_->shared_free(p); }

void SimDevice::download(void* host_dst, const void*, size_t bytes) { std::memset(host_dst, 0, bytes); }
void SimDevice::download_as(float* host_dst, const void*, DType, size_t n) { std::fill(host_dst, host_dst + n, 0.f); }

Event SimDevice::create_event(EventUse) {
  size_t i = events_.size();
  if (!free_events_.empty()) {
    i = free_events_.back();
    free_events_.pop_back();
  } else {
    events_.push_back(0);
  }
  events_[i] = 0;
  return Event{reinterpret_cast<void*>(intptr_t(i + 1))};
}

void SimDevice::destroy_event(Event e) { free_events_.push_back(size_t(reinterpret_cast<intptr_t>(e.handle) - 1)); }

void SimDevice::record(Event e, Stream s) {
  events_[size_t(reinterpret_cast<intptr_t>(e.handle) - 1)] = std::max(ready_[index(s)], host_time());
}

void SimDevice::wait(Stream s, Event e) {
  double& r = ready_[index(s)];
  r = std::max(r, events_[size_t(reinterpret_cast<intptr_t>(e.handle) - 1)]);
}

void SimDevice::synchronize() {
  double t = host_time();
  for (double r : ready_) t = std::max(t, r);
  clock_->advance_to(t);
  host_ = clock_->now();
  comm_since_sync_ = false;
}

double SimDevice::elapsed_ms(Event start, Event stop) {
  return (events_[size_t(reinterpret_cast<intptr_t>(stop.handle) - 1)] -
          events_[size_t(reinterpret_cast<intptr_t>(start.handle) - 1)]) *
         1e3;
}

}  // namespace spb
