// `dp`, the paper's "DP baseline" and the ideal: every rank runs its own tokens as an independent sequence, so there
// is no communication at all. Its result is checked against the single-device run of each rank's own tokens.
#include "sp/method.h"
#include "sp/rank_attention.h"
#include "sp/timeline.h"

namespace spb {
namespace {

class DataParallel final : public SpMethod {
 public:
  DataParallel(Runtime& rt, const SpConfig& c) : rt_(rt), attn_(make_rank_attention(rt, c)) {}

  void forward(const SpForwardArgs& a) override {
    TimelineSpan span(rt_, attn_->forward_span(), Lane::compute);
    attn_->forward(a, a.h0, a.h_out);
  }
  void backward(const SpForwardArgs& f, const SpBackwardArgs& a) override {
    TimelineSpan span(rt_, attn_->backward_span(), Lane::compute);
    attn_->prepare_backward(f, f.h0);
    attn_->backward(f, a, f.h0, f.h_out, a.dht, a.dh_in);
  }
  bool independent_sequences() const override { return true; }
  bool takes_grad_ld() const override { return attn_->takes_grad_ld(); }

 private:
  Runtime& rt_;
  std::unique_ptr<RankAttention> attn_;
};

}  // namespace
}  // namespace spb

using spb::DataParallel;
SPB_REGISTER_METHOD("dp", "ideal baseline: each rank its own sequence, no communication", DataParallel)
