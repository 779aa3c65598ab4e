// The overlap timeline: spans of work on the compute streams and the communication stream of one iteration. A span is
// a pair of events recorded on its stream; times are read against an origin event recorded first on the compute
// stream, so every span of a rank shares one clock (the ranks' origins are aligned by a barrier just before).
#pragma once

#include <string>
#include <vector>

#include "sp/runtime.h"

namespace spb {

// Which of the device's streams a span is on (Device::compute_stream, second_compute_stream, comm_stream).
enum class Lane { compute, compute2, comm };
const char* lane_name(Lane l);  // "compute", "compute2", "comm": the timeline CSV's stream column
Stream lane_stream(Device& dev, Lane l);

class Timeline {
 public:
  struct Span {
    std::string name, stream;  // stream: lane_name
    double start_us = 0, end_us = 0;
  };

  explicit Timeline(Device& dev) : dev_(dev) {}
  ~Timeline();
  void start();  // clears the spans and records the origin on the compute stream
  int begin(const std::string& name, Lane lane);
  void end(int span);
  std::vector<Span> read();  // after the device has finished the iteration

 private:
  struct Open {
    std::string name;
    Lane lane;
    Event a, b;
  };
  Event event();
  Device& dev_;
  Event origin_{};
  std::vector<Open> spans_;
  std::vector<Event> pool_;
  size_t used_ = 0;
};

// Marks a span for as long as it lives; free when no timeline is being recorded.
class TimelineSpan {
 public:
  TimelineSpan(Runtime& rt, const char* name, Lane lane) : tl_(rt.timeline) {
    if (tl_) id_ = tl_->begin(name, lane);
  }
  ~TimelineSpan() {
    if (tl_) tl_->end(id_);
  }
  TimelineSpan(const TimelineSpan&) = delete;
  TimelineSpan& operator=(const TimelineSpan&) = delete;

 private:
  Timeline* tl_;
  int id_ = -1;
};

}  // namespace spb
