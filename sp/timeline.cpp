#include "sp/timeline.h"

namespace spb {

const char* lane_name(Lane l) {
  switch (l) {
    case Lane::compute: return "compute";
    case Lane::compute2: return "compute2";
    case Lane::comm: return "comm";
  }
  return "?";
}

Stream lane_stream(Device& dev, Lane l) {
  switch (l) {
    case Lane::compute: return dev.compute_stream();
    case Lane::compute2: return dev.second_compute_stream();
    case Lane::comm: return dev.comm_stream();
  }
  return dev.compute_stream();
}

Timeline::~Timeline() {
  for (Event e : pool_) dev_.destroy_event(e);
}

Event Timeline::event() {
  if (used_ == pool_.size()) pool_.push_back(dev_.create_event());
  return pool_[used_++];
}

void Timeline::start() {
  spans_.clear();
  used_ = 0;
  origin_ = event();
  dev_.record(origin_, dev_.compute_stream());
}

int Timeline::begin(const std::string& name, Lane lane) {
  spans_.push_back({name, lane, event(), event()});
  dev_.record(spans_.back().a, lane_stream(dev_, lane));
  return int(spans_.size()) - 1;
}

void Timeline::end(int span) {
  Open& s = spans_[size_t(span)];
  dev_.record(s.b, lane_stream(dev_, s.lane));
}

std::vector<Timeline::Span> Timeline::read() {
  dev_.synchronize();
  std::vector<Span> out;
  for (const Open& s : spans_)
    out.push_back({s.name, lane_name(s.lane), dev_.elapsed_ms(origin_, s.a) * 1e3,
                   dev_.elapsed_ms(origin_, s.b) * 1e3});
  return out;
}

}  // namespace spb
