// The SMPI side of the simulated backend: the rank's clock in the simulation and its shared memory. Built only in
// the simulated build (-DSPB_SIM=ON, smpicxx); elsewhere make_smpi_clock says how to get one.
#include "sim/sim_runtime.h"

#include "runtime/error.h"

#ifdef SPB_SIM
#include <algorithm>
#include <vector>

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
  ~SmpiClock() override {
    for (void* r : regions_) SMPI_SHARED_FREE(r);
  }
  // Every buffer of the rank is one region, as large as the largest so far: their contents do not matter, and SMPI
  // maps every page of a shared allocation when it makes it (MAP_POPULATE), in maps of its own. GLA-1B's 526 buffers
  // a rank (51 GB) took most of a run's time at 16 ranks that way, and more maps than the kernel allows at 256.
  void* shared_alloc(size_t bytes) override {
    if (regions_.empty() || bytes > region_bytes_) {
      region_bytes_ = std::max(bytes, kLeastRegionBytes);
      regions_.push_back(SMPI_SHARED_MALLOC(region_bytes_));
    }
    return regions_.back();
  }
  void shared_free(void*) override {}  // the regions go with the clock
  double route_latency_s(const std::string& to) override {
    const sg_host_t host = sg_host_by_name(to.c_str());
    SPB_CHECK(host, "no host " + to + " on the simulated platform");
    return sg_host_get_route_latency(sg_host_self(), host);
  }

 private:
  static constexpr size_t kLeastRegionBytes = size_t(64) << 20;
  std::vector<void*> regions_;  // each larger than the last; the newest is the one handed out
  size_t region_bytes_ = 0;
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
