// The README's example of a new SP method: the state passed from rank to rank before each rank's compute, as lasp1
// does without its timeline spans. Not built into spbench (baselines/*.cpp are; this folder is not): ctest
// methods.example.cpu.np* compiles it into the method tests and runs them on it (tests/CMakeLists.txt).
#include "sp/method.h"
#include "sp/sp_local.h"
#include "kernels/gla/gla.h"

namespace spb {
namespace {
class Chain final : public SpMethod {
 public:
  Chain(Runtime& rt, const SpConfig& c)
      : rt_(rt), ws_(*rt.dev, *rt.kern, c.local), bytes_(c.local.state_elems() * 4), S_(*rt.dev, bytes_),
        dS_(*rt.dev, bytes_), ht_(*rt.dev, bytes_), dh_(*rt.dev, bytes_) {}
  void forward(const SpForwardArgs& a) override {
    const int p = rt_.rank();
    const Stream st = rt_.dev->compute_stream();
    if (p == 0) copy_or_zero(*rt_.dev, S_.f32(), a.h0, ws_.shape.state_elems(), st);
    else rt_.comm->recv(S_.get(), bytes_, p - 1, st);  // the state entering this rank
    float* ht = a.h_out ? a.h_out : ht_.f32();
    gla_forward(*rt_.kern, ws_, a.q, a.k, a.v, a.g, S_.f32(), a.o, ht, st);
    if (p + 1 < rt_.world()) rt_.comm->send(ht, bytes_, p + 1, st);
  }
  void backward(const SpForwardArgs& f, const SpBackwardArgs& a) override {  // the same chain reversed
    const int p = rt_.rank();
    const Stream st = rt_.dev->compute_stream();
    if (p == rt_.world() - 1) copy_or_zero(*rt_.dev, dS_.f32(), a.dht, ws_.shape.state_elems(), st);
    else rt_.comm->recv(dS_.get(), bytes_, p + 1, st);
    float* dh = a.dh_in ? a.dh_in : dh_.f32();
    gla_backward_saved(*rt_.kern, ws_, f.q, f.k, f.v, f.h_out ? f.h_out : ht_.f32(), a.d_o, dS_.f32(), a.dq, a.dk,
                       a.dv, a.dg, dh, st, a.grad_ld);
    if (p > 0) rt_.comm->send(dh, bytes_, p - 1, st);
  }
  bool takes_grad_ld() const override { return true; }

 private:
  Runtime& rt_;
  GlaWorkspace ws_;
  size_t bytes_;
  Buffer S_, dS_, ht_, dh_;
};
}  // namespace
}  // namespace spb

using spb::Chain;
SPB_REGISTER_METHOD("chain", "the state from rank to rank before each rank's compute", Chain)
