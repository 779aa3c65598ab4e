// The SMPI side of the simulated backend: the rank's clock in the simulation and its shared memory. Built only in
// the simulated build (-DSPB_SIM=ON, smpicxx); elsewhere make_smpi_clock says how to get one.
#include "sim/sim_runtime.h"

#include "runtime/error.h"

#ifdef SPB_SIM
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <smpi/smpi.h>

namespace spb {
namespace {

class SmpiClock final : public SimClock {
 public:
  double now() override { return simgrid_get_clock(); }
  // Simulated computation of the gap at the host's own speed: exactly `t - now()` seconds of the rank's time.
  void advance_to(double t) override {
    const double gap = t - now();
    if (gap > 0) smpi_execute_flops(gap * sg_host_get_speed(sg_host_self()));
  }
  void* shared_alloc(size_t bytes) override { return SMPI_SHARED_MALLOC(bytes ? bytes : 1); }
  void shared_free(void* p) override { SMPI_SHARED_FREE(p); }
};

}  // namespace

std::unique_ptr<SimClock> make_smpi_clock() { return std::make_unique<SmpiClock>(); }

}  // namespace spb
#else
namespace spb {
std::unique_ptr<SimClock> make_smpi_clock() {
  throw UsageError("--backend sim: this spbench is not the simulated build (configure with -DSPB_SIM=ON and smpicxx: "
                   "scripts/sim.sh)");
}
}  // namespace spb
#endif
