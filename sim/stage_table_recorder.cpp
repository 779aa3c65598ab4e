#include "sim/stage_table_recorder.h"

#include <map>

namespace spb {

std::string stage_key(std::initializer_list<std::pair<const char*, long long>> parts) {
  std::string s;
  for (const auto& [name, n] : parts) s += (s.empty() ? "" : " ") + std::string(name) + std::to_string(n);
  return s;
}

StageRecorder::~StageRecorder() {
  for (Call& c : calls_) free_events_.push_back(c.start), free_events_.push_back(c.stop);
  for (Event e : free_events_) dev_.destroy_event(e);
}

Event StageRecorder::take_event() {
  if (free_events_.empty()) return dev_.create_event(EventUse::timing);
  const Event e = free_events_.back();
  free_events_.pop_back();
  return e;
}

std::vector<StageSample> StageRecorder::take() {
  dev_.synchronize();
  std::map<std::pair<std::string, std::string>, std::vector<double>> by_key;
  for (Call& c : calls_) {
    by_key[{c.stage, c.shape}].push_back(dev_.elapsed_ms(c.start, c.stop));
    free_events_.push_back(c.start), free_events_.push_back(c.stop);
  }
  calls_.clear();
  std::vector<StageSample> out;
  for (auto& [key, ms] : by_key) out.push_back({key.first, key.second, std::move(ms)});
  return out;
}

}  // namespace spb
