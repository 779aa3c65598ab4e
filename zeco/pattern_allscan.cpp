// The All-Scan pattern (ZeCO's collective): every rank receives the fold of the states of the ranks before it,
// pipelined in blocks of `block_elems`. Each link carries one state, so busbw = algbw = state bytes / time.
// The LASP-1 chain pattern is the same scan with a single block: each hop waits for the whole state.
#include <cmath>
#include <memory>

#include "sp/collective.h"
#include "runtime/error.h"
#include "runtime/stats.h"
#include "zeco/all_scan.h"
#ifdef SPB_HAVE_CUDA
#include "zeco/all_scan_device.h"
#endif

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
    const std::string backend = resolve_allscan(c.allscan, rt.dev->is_gpu(), rt.topo);
    if (!whole_state && is_device_allscan(backend)) {
#ifdef SPB_HAVE_CUDA
      scan_ = make_device_all_scan(rt, n_, backend);
      backend_ = backend;
#else
      throw UsageError("--allscan " + c.allscan + ": this spbench was built without CUDA");
#endif
    }
    // The LASP-1 chain pattern stays the chain whatever --allscan says.
    if (!whole_state && is_node_aware_allscan(backend)) {
      host_scan_ = std::make_unique<HostAllScan>(rt, backend, rows_, n_);
      backend_ = backend;
    }
  }

  void run(Stream st) override {
    AllScanArgs a;
    a.rows = rows_, a.cols = cols_, a.blocks = blocks_;
    a.decay = decay_.f32(), a.local = local_.f32(), a.carry_in = in_.f32(), a.carry_out = out_.f32();
#ifdef SPB_HAVE_CUDA
    if (scan_) return scan_->run(a, st);
#endif
    if (host_scan_) return host_scan_->run(a, st);
    all_scan_host(rt_, a, st);
  }

  double check() override {
#ifdef SPB_HAVE_CUDA
    if (scan_) scan_->check(rt_.dev->comm_stream());  // throws, naming the rank that did not arrive
#endif
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
  std::string backend_;  // the device protocol, host-hier, host-logdepth, or "" (the chain over the communicator)
  Buffer decay_, local_, in_, out_;
  std::unique_ptr<HostAllScan> host_scan_;
#ifdef SPB_HAVE_CUDA
  std::unique_ptr<DeviceAllScan> scan_;
#endif
};

class ChainPattern final : public AllScanPattern {
 public:
  ChainPattern(Runtime& rt, const CollectiveConfig& c) : AllScanPattern(rt, c, true) {}
};

using AllScan = AllScanPattern;

}  // namespace
}  // namespace spb

using spb::AllScan;
using spb::ChainPattern;
SPB_REGISTER_PATTERN("allscan", "ZeCO All-Scan: fold of the predecessors' states, pipelined in blocks", AllScan)
SPB_REGISTER_PATTERN("chain", "LASP-1 chain: the same fold, one whole state per hop", ChainPattern)
