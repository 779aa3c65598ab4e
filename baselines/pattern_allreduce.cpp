// The gradients' collective (dp and the model level): an in-place all-reduce (sum) of a rank's elements.
// nccl-tests' all-reduce convention: algbw = the buffer's bytes / time, busbw = algbw * 2(P-1)/P.
#include "sp/collective.h"
#include "runtime/stats.h"

namespace spb {
namespace {

class AllReducePattern final : public CollectivePattern {
 public:
  AllReducePattern(Runtime& rt, const CollectiveConfig& c) : rt_(rt), n_(c.elems), buf_(*rt.dev, n_ * 4) {
    // The timed calls sum zeros (in place, repeated sums of data would grow); check() sums the data once.
    rt.dev->fill_zero(buf_.get(), n_ * 4, rt.dev->comm_stream());
  }
  void run(Stream st) override { rt_.comm->all_reduce_sum(static_cast<float*>(buf_.get()), n_, st); }
  double check() override {
    const Stream cs = rt_.dev->comm_stream();
    const auto x = pattern_data(rt_.rank(), 6, n_);
    rt_.dev->synchronize();
    rt_.dev->upload(buf_.get(), x.data(), n_ * 4);
    run(cs);
    rt_.dev->synchronize();
    std::vector<float> got(n_), expect(n_, 0.f);
    rt_.dev->download(got.data(), buf_.get(), n_ * 4);
    for (int j = 0; j < rt_.world(); ++j) {
      const auto y = pattern_data(j, 6, n_);
      for (size_t i = 0; i < n_; ++i) expect[i] += y[i];
    }
    return rel_rms_error(expect, got, n_);
  }
  double algbw_bytes() const override { return double(n_) * 4; }
  double busbw_factor() const override { return 2.0 * (rt_.world() - 1) / rt_.world(); }

 private:
  Runtime& rt_;
  size_t n_;
  Buffer buf_;
};

}  // namespace
}  // namespace spb

using spb::AllReducePattern;
SPB_REGISTER_PATTERN("allreduce", "dp: in-place all-reduce (sum) of a rank's elements", AllReducePattern)
