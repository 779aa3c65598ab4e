// What the stage tables are made of (DESIGN §10): the device time of every kernel call, recorded by stage and shape
// key. One recorder serves both tables: RecordingKernels (sim/stage_table.h) times the GLA stages with it,
// RecordingModelKernels (sim/model_stage_table.h) the model's kernels, and stage_key builds the shape keys that the
// recorders write and the simulated kernels look up. Named under sim/stage_table*, the paths that
// report/src/report_data.cpp counts as measuring the stage rows, so that a change here marks them.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "runtime/device.h"

namespace spb {

// A shape key: each part's name followed by its number, space-separated ("n16384 D2048", "rows2048 cols128").
std::string stage_key(std::initializer_list<std::pair<const char*, long long>> parts);

// One stage at one shape, as recorded on one rank: milliseconds per call and the calls it saw.
struct StageSample {
  std::string stage, shape;
  std::vector<double> ms;
};

// Times calls on their streams with a pair of device events each, while recording: a call's events bracket it on its
// own stream, so its time is its kernels' own (what waits before it on that stream is not in it). The events are
// kept for reuse and destroyed with the recorder.
class StageRecorder {
 public:
  explicit StageRecorder(Device& dev) : dev_(dev) {}
  ~StageRecorder();
  StageRecorder(const StageRecorder&) = delete;
  StageRecorder& operator=(const StageRecorder&) = delete;

  void set_recording(bool on) { recording_ = on; }
  // Runs `body` between two events on st where recording (its stage and shape named), and alone otherwise; returns
  // what body returns.
  template <class Body>
  auto timed(const char* stage, const std::string& shape, Stream st, Body&& body) -> decltype(body());
  // Every recorded call since the last take, grouped by stage and shape (synchronizes the device).
  std::vector<StageSample> take();

 private:
  struct Call {
    std::string stage, shape;
    Event start, stop;
  };
  Event take_event();

  Device& dev_;
  bool recording_ = false;
  std::vector<Call> calls_;
  std::vector<Event> free_events_;
};

template <class Body>
auto StageRecorder::timed(const char* stage, const std::string& shape, Stream st, Body&& body) -> decltype(body()) {
  if (!recording_) return body();
  calls_.push_back({stage, shape, take_event(), take_event()});
  dev_.record(calls_.back().start, st);
  struct Stop {  // recorded after the body, also for a body that returns a value
    Device& dev;
    Event stop;
    Stream st;
    ~Stop() { dev.record(stop, st); }
  } stop{dev_, calls_.back().stop, st};
  return body();
}

}  // namespace spb
