// The All-Scan pattern (ZeCO's collective): every rank receives the fold of the states of the ranks before it,
// pipelined in blocks of `block_elems`. Each link carries one state, so busbw = algbw = state bytes / time.
// The LASP-1 chain pattern is the same scan with a single block: each hop waits for the whole state.
// Under Gated DeltaNet's dense map (CollectiveConfig::map) a block is a set of whole columns of every head, the
// state is column-blocked (sp/rank_map.h) and each rank folds its blocks with its own dk x dk matrices: still one
// state a link, at the cost of a matrix product a block instead of a scaling.
#include <algorithm>
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
      : rt_(rt), n_(c.elems), cols_(c.cols), rows_(c.elems / c.cols), map_(c.map),
        transition_elems_(pattern_transition_elems(c)), decay_(*rt.dev, transition_elems_ * 4),
        local_(*rt.dev, n_ * 4), in_(*rt.dev, n_ * 4), out_(*rt.dev, n_ * 4) {
    const size_t block = whole_state || c.block_elems == 0 ? n_ : c.block_elems;
    if (map_.block_axis() == BlockAxis::rows)
      SPB_USAGE(block % cols_ == 0 && n_ % block == 0,
                "--block-elems: " + std::to_string(block) + " must be a multiple of a state row (" +
                    std::to_string(cols_) + " elements) and divide the state (" + std::to_string(n_) + " elements)");
    else
      SPB_USAGE(n_ % block == 0 && cols_ % (n_ / block) == 0,
                "--block-elems: " + std::to_string(block) + " must divide the state (" + std::to_string(n_) +
                    " elements) into a number of blocks that divides its " + std::to_string(cols_) +
                    " columns (the dense map's blocks are whole columns)");
    blocks_ = int(n_ / block);
    const int p = rt.rank();
    const auto x = pattern_data(p, 2, n_);
    rt.dev->upload(decay_.get(), transition(p).data(), transition_elems_ * 4);
    rt.dev->upload(local_.get(), x.data(), n_ * 4);
    // The LASP-1 chain pattern stays the chain whatever --allscan says.
    scan_ = make_all_scan(rt, whole_state ? "host" : c.allscan, std::max(rows_, transition_elems_), n_);
    if (scan_->backend() != "host") backend_ = scan_->backend();
  }

  void run(Stream st) override {
    AllScanArgs a;
    a.rows = rows_, a.cols = cols_, a.blocks = blocks_, a.map = map_;
    a.transition = decay_.f32(), a.local = local_.f32(), a.carry_in = in_.f32(), a.carry_out = out_.f32();
    scan_->run(a, st);
  }

  double check() override {
    scan_->check(rt_.dev->comm_stream());  // throws, naming the rank that did not arrive
    std::vector<float> got(n_), expect(n_, 0.f);
    rt_.dev->download(got.data(), in_.get(), n_ * 4);
    for (int j = 0; j < rt_.rank(); ++j) {
      const auto t = transition(j), x = pattern_data(j, 2, n_);
      if (map_.kind == TransitionKind::dense) {
        fold_dense(t, x, expect);
        continue;
      }
      for (size_t r = 0; r < rows_; ++r) {
        const float e = std::exp(t[r]);
        for (size_t c = 0; c < cols_; ++c) expect[r * cols_ + c] = e * expect[r * cols_ + c] + x[r * cols_ + c];
      }
    }
    return rel_rms_error(expect, got, n_);
  }

  double algbw_bytes() const override { return double(n_) * 4; }
  double busbw_factor() const override { return 1.0; }
  std::string backend() const override { return backend_; }

 private:
  std::vector<float> transition(int rank) const {
    if (map_.kind == TransitionKind::dense) return pattern_dense_transition(rank, 1, rows_ / map_.head_rows, map_.head_rows);
    return pattern_decay(rank, 1, rows_);
  }
  // s = A s + x on every column block of the column-blocked state s (each block rows x cols/K, A per head).
  void fold_dense(const std::vector<float>& A, const std::vector<float>& x, std::vector<float>& s) const {
    const size_t dk = map_.head_rows, m = cols_ / size_t(blocks_);
    std::vector<double> y(rows_ * m);
    for (int k = 0; k < blocks_; ++k) {
      const size_t at = size_t(k) * rows_ * m;
      for (size_t r = 0; r < rows_; ++r) {
        const size_t h = r / dk, i = r % dk;
        for (size_t c = 0; c < m; ++c) {
          double acc = x[at + r * m + c];
          for (size_t e = 0; e < dk; ++e) acc += double(A[(h * dk + i) * dk + e]) * s[at + (h * dk + e) * m + c];
          y[r * m + c] = acc;
        }
      }
      for (size_t e = 0; e < y.size(); ++e) s[at + e] = float(y[e]);
    }
  }

  Runtime& rt_;
  size_t n_, cols_, rows_;
  RankMapType map_;
  size_t transition_elems_;
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
