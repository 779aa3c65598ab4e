// The All-Scan pattern (ZeCO's collective): every rank receives the fold of the states of the ranks before it,
// pipelined in blocks of `block_elems`. Each link carries one state, so busbw = algbw = state bytes / time.
// The LASP-1 chain pattern is the same scan with a single block: each hop waits for the whole state.
#include <cmath>
#include <memory>

#include "sp/collective.h"
#include "runtime/error.h"
#include "runtime/stats.h"
#include "zeco/all_scan.h"

namespace spb {
namespace {

class AllScanPattern : public CollectivePattern {
 public:
  AllScanPattern(Runtime& rt, const CollectiveConfig& c, bool whole_state = false)
      : rt_(rt), n_(c.elems), cols_(c.cols), rows_(c.elems / c.cols),
        decay_(*rt.dev, rows_ * 4), local_(*rt.dev, n_ * 4), in_(*rt.dev, n_ * 4), out_(*rt.dev, n_ * 4) {
    const size_t block = whole_state || c.block_elems == 0 ? n_ : c.block_elems;
    SPB_USAGE(block % cols_ == 0 && n_ % block == 0,
              "--block-elems: " + std::to_string(block) + " must be a multiple of a state row (" +
                  std::to_string(cols_) + " elements) and divide the state (" + std::to_string(n_) + " elements)");
    blocks_ = int(n_ / block);
    const int p = rt.rank();
    const auto d = pattern_decay(p, 1, rows_), x = pattern_data(p, 2, n_);
    rt.dev->upload(decay_.get(), d.data(), rows_ * 4);
    rt.dev->upload(local_.get(), x.data(), n_ * 4);
    // The LASP-1 chain pattern stays the chain whatever --allscan says.
    scan_ = make_all_scan(rt, whole_state ? "host" : c.allscan, rows_, n_);
    if (scan_->backend() != "host") backend_ = scan_->backend();
  }

  void run(Stream st) override {
    AllScanArgs a;
    a.rows = rows_, a.cols = cols_, a.blocks = blocks_;
    a.transition = decay_.f32(), a.local = local_.f32(), a.carry_in = in_.f32(), a.carry_out = out_.f32();
    scan_->run(a, st);
  }

  double check() override {
    scan_->check(rt_.dev->comm_stream());  // throws, naming the rank that did not arrive
    std::vector<float> got(n_), expect(n_, 0.f);
    rt_.dev->download(got.data(), in_.get(), n_ * 4);
    for (int j = 0; j < rt_.rank(); ++j) {
      const auto d = pattern_decay(j, 1, rows_), x = pattern_data(j, 2, n_);
      for (size_t r = 0; r < rows_; ++r) {
        const float e = std::exp(d[r]);
        for (size_t c = 0; c < cols_; ++c) expect[r * cols_ + c] = e * expect[r * cols_ + c] + x[r * cols_ + c];
      }
    }
    return rel_rms_error(expect, got, n_);
  }

  double algbw_bytes() const override { return double(n_) * 4; }
  double busbw_factor() const override { return 1.0; }
  std::string backend() const override { return backend_; }

 private:
  Runtime& rt_;
  size_t n_, cols_, rows_;
  int blocks_ = 1;
  std::string backend_;  // the device protocol, a node-aware scan, or "" (the chain over the communicator)
  Buffer decay_, local_, in_, out_;
  std::unique_ptr<AllScan> scan_;
};

class ChainPattern final : public AllScanPattern {
 public:
  ChainPattern(Runtime& rt, const CollectiveConfig& c) : AllScanPattern(rt, c, true) {}
};

}  // namespace
}  // namespace spb

using spb::AllScanPattern;
using spb::ChainPattern;
SPB_REGISTER_PATTERN("allscan", "ZeCO All-Scan: fold of the predecessors' states, pipelined in blocks", AllScanPattern)
SPB_REGISTER_PATTERN("chain", "LASP-1 chain: the same fold, one whole state per hop", ChainPattern)
