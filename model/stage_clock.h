// Where a training step's time goes: the model marks the start of each stage on the compute stream (the stage ends
// at the next mark), and the clock sums every stage's time over the blocks and the steps it saw, with the GEMM FLOPs
// each stage ran. Marks cost an event record each, so it runs only in `spbench model --profile` steps.
#pragma once

#include <string>
#include <vector>

#include "runtime/device.h"

namespace spb {

class StageClock {
 public:
  StageClock(Device& dev, Stream st);
  ~StageClock();
  void mark(const char* stage);  // a new stage starts here
  void add_flops(double f) { pending_flops_ += f; }
  // Closes the step's last stage, waits for the device and adds the step's stage times to the totals.
  void end_step();

  struct Stage {
    std::string name;
    double ms = 0, flops = 0;
  };
  const std::vector<Stage>& stages() const { return stages_; }  // in the order first seen
  int steps() const { return steps_; }

 private:
  Device& dev_;
  Stream st_;
  std::vector<Event> events_;       // a pool, reused every step
  std::vector<size_t> mark_stage_;  // the stage of each mark of this step
  std::vector<double> mark_flops_;
  std::vector<Stage> stages_;
  double pending_flops_ = 0;
  int steps_ = 0;
};

}  // namespace spb
