// Ulysses' collective: an all-to-all of a rank's elements, 1/P of them to each rank. nccl-tests' convention:
// algbw = the rank's bytes / time, busbw = algbw * (P-1)/P.
#include "sp/collective.h"
#include "runtime/error.h"
#include "runtime/stats.h"

namespace spb {
namespace {

class AllToAllPattern final : public CollectivePattern {
 public:
  AllToAllPattern(Runtime& rt, const CollectiveConfig& c)
      : rt_(rt), n_(c.elems), part_(c.elems / rt.world()), send_(*rt.dev, n_ * 4), recv_(*rt.dev, n_ * 4) {
    SPB_USAGE(n_ % rt.world() == 0, "alltoall: " + std::to_string(n_) + " elements per rank do not split over " +
                                        std::to_string(rt.world()) + " ranks");
    const auto x = pattern_data(rt.rank(), 5, n_);
    rt.dev->upload(send_.get(), x.data(), n_ * 4);
  }
  void run(Stream st) override { rt_.comm->all_to_all(send_.get(), recv_.get(), part_ * 4, st); }
  double check() override {
    std::vector<float> got(n_), expect;
    rt_.dev->download(got.data(), recv_.get(), n_ * 4);
    for (int i = 0; i < rt_.world(); ++i) {  // part p of rank i's send
      const auto x = pattern_data(i, 5, n_);
      expect.insert(expect.end(), x.begin() + rt_.rank() * part_, x.begin() + (rt_.rank() + 1) * part_);
    }
    return rel_rms_error(expect, got, n_);
  }
  double algbw_bytes() const override { return double(n_) * 4; }
  double busbw_factor() const override { return double(rt_.world() - 1) / rt_.world(); }

 private:
  Runtime& rt_;
  size_t n_, part_;
  Buffer send_, recv_;
};

}  // namespace
}  // namespace spb

using spb::AllToAllPattern;
SPB_REGISTER_PATTERN("alltoall", "Ulysses: all-to-all, 1/P of a rank's elements to each rank", AllToAllPattern)
