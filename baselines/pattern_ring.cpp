// The ring method's collective: P-1 steps, each a simultaneous send to p+1 and receive from p-1 of one block
// (in the method, a rank's k, v, g). algbw = the bytes a rank receives over all steps / time; each link carries every
// step's block once, so busbw = algbw.
#include "sp/collective.h"
#include "runtime/stats.h"

namespace spb {
namespace {

class RingPattern final : public CollectivePattern {
 public:
  RingPattern(Runtime& rt, const CollectiveConfig& c)
      : rt_(rt), n_(c.elems), buf_{Buffer(*rt.dev, n_ * 4), Buffer(*rt.dev, n_ * 4)} {
    const auto x = pattern_data(rt.rank(), 4, n_);
    rt.dev->upload(buf_[0].get(), x.data(), n_ * 4);
    rt.dev->upload(buf_[1].get(), x.data(), n_ * 4);
  }
  void run(Stream st) override {
    const int p = rt_.rank(), P = rt_.world();
    for (int step = 1; step < P; ++step) {
      rt_.comm->group_start();
      rt_.comm->send(buf_[(step - 1) % 2].get(), n_ * 4, (p + 1) % P, st);
      rt_.comm->recv(buf_[step % 2].get(), n_ * 4, (p - 1 + P) % P, st);
      rt_.comm->group_end();
    }
  }
  double check() override {
    // After P-1 steps the newest buffer holds the block of rank p-(P-1) = p+1 (mod P).
    const int p = rt_.rank(), P = rt_.world();
    std::vector<float> got(n_);
    rt_.dev->download(got.data(), buf_[(P - 1) % 2].get(), n_ * 4);
    const auto expect = pattern_data((p + 1) % P, 4, n_);
    return rel_rms_error(expect, got, n_);
  }
  double algbw_bytes() const override { return double(n_) * 4 * (rt_.world() - 1); }
  double busbw_factor() const override { return 1.0; }

 private:
  Runtime& rt_;
  size_t n_;
  Buffer buf_[2];
};

}  // namespace
}  // namespace spb

using spb::RingPattern;
SPB_REGISTER_PATTERN("ring", "ring rotation: P-1 steps of send to p+1 / receive from p-1", RingPattern)
