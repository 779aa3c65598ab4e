#include "harness/timeline.h"

namespace spb {

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

int Timeline::begin(const std::string& name, bool comm) {
  spans_.push_back({name, comm, event(), event()});
  dev_.record(spans_.back().a, comm ? dev_.comm_stream() : dev_.compute_stream());
  return int(spans_.size()) - 1;
}

void Timeline::end(int span) {
  Open& s = spans_[size_t(span)];
  dev_.record(s.b, s.comm ? dev_.comm_stream() : dev_.compute_stream());
}

std::vector<Timeline::Span> Timeline::read() {
  dev_.synchronize();
  std::vector<Span> out;
  for (const Open& s : spans_)
    out.push_back({s.name, s.comm ? "comm" : "compute", dev_.elapsed_ms(origin_, s.a) * 1e3,
                   dev_.elapsed_ms(origin_, s.b) * 1e3});
  return out;
}

}  // namespace spb
