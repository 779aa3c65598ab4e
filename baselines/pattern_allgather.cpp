// LASP-2's collective: every rank gathers every rank's (state, transition) record: a decay a row for GLA, a dk x dk
// matrix a head for Gated DeltaNet (CollectiveConfig::map), which makes its record (dk + dv) / dv states.
// nccl-tests' all-gather convention: algbw = the gathered bytes (P records) / time, busbw = algbw * (P-1)/P.
#include "sp/collective.h"
#include "runtime/stats.h"

namespace spb {
namespace {

class AllGatherPattern final : public CollectivePattern {
 public:
  AllGatherPattern(Runtime& rt, const CollectiveConfig& c)
      : rt_(rt), rec_(c.elems + pattern_transition_elems(c)), mine_(*rt.dev, rec_ * 4), all_(*rt.dev, rec_ * 4 * rt.world()) {
    const auto x = record(rt.rank());
    rt.dev->upload(mine_.get(), x.data(), rec_ * 4);
  }
  void run(Stream st) override { rt_.comm->all_gather(mine_.get(), all_.get(), rec_ * 4, st); }
  double check() override {
    std::vector<float> got(rec_ * rt_.world()), expect;
    rt_.dev->download(got.data(), all_.get(), got.size() * 4);
    for (int j = 0; j < rt_.world(); ++j) {
      const auto x = record(j);
      expect.insert(expect.end(), x.begin(), x.end());
    }
    return rel_rms_error(expect, got, got.size());
  }
  double algbw_bytes() const override { return double(rec_) * 4 * rt_.world(); }
  double busbw_factor() const override { return double(rt_.world() - 1) / rt_.world(); }

 private:
  std::vector<float> record(int rank) const { return pattern_data(rank, 3, rec_); }
  Runtime& rt_;
  size_t rec_;
  Buffer mine_, all_;
};

}  // namespace
}  // namespace spb

using spb::AllGatherPattern;
SPB_REGISTER_PATTERN("allgather", "LASP-2: all-gather of every rank's state and decay", AllGatherPattern)
