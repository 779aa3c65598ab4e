#include "model/stage_clock.h"

namespace spb {

StageClock::StageClock(Device& dev, Stream st) : dev_(dev), st_(st) {}

StageClock::~StageClock() {
  for (Event e : events_) dev_.destroy_event(e);
}

void StageClock::mark(const char* stage) {
  if (!mark_stage_.empty()) mark_flops_.back() += pending_flops_;
  pending_flops_ = 0;
  size_t i = 0;
  while (i < stages_.size() && stages_[i].name != stage) ++i;
  if (i == stages_.size()) stages_.push_back({stage});
  const size_t n = mark_stage_.size();
  if (n == events_.size()) events_.push_back(dev_.create_event(EventUse::timing));
  dev_.record(events_[n], st_);
  mark_stage_.push_back(i);
  mark_flops_.push_back(0);
}

void StageClock::end_step() {
  if (mark_stage_.empty()) return;
  mark_flops_.back() += pending_flops_;
  pending_flops_ = 0;
  const size_t n = mark_stage_.size();
  if (n == events_.size()) events_.push_back(dev_.create_event(EventUse::timing));
  dev_.record(events_[n], st_);
  dev_.synchronize();
  for (size_t m = 0; m < n; ++m) {
    stages_[mark_stage_[m]].ms += dev_.elapsed_ms(events_[m], events_[m + 1]);
    stages_[mark_stage_[m]].flops += mark_flops_[m];
  }
  mark_stage_.clear();
  mark_flops_.clear();
  ++steps_;
}

}  // namespace spb
