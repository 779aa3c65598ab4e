// ZeCO (DESIGN §3): S_in and dS_out by All-Scan, K blocks pipelined along the state's rows, on the communication
// stream. In order (the default), a rank computes only its boundary state before the scan and everything else from
// the true incoming state after it; with --overlap 1 the output from zero-start states overlaps the forward scan and
// is corrected after it (SpLocalGla says what each order costs).
#include "harness/error.h"
#include "harness/method.h"
#include "harness/sp_local.h"
#include "harness/timeline.h"
#include "zeco/all_scan.h"
#ifdef SPB_HAVE_CUDA
#include "zeco/all_scan_device.h"
#endif

namespace spb {
namespace {

class Zeco final : public SpMethod {
 public:
  Zeco(Runtime& rt, const SpConfig& c)
      : rt_(rt),
        cfg_(c),
        local_(rt, c.local),
        ready_(*rt.dev, EventUse::order),
        scanned_(*rt.dev, EventUse::order) {
    validate_blocks(c.local.state_rows(), c.blocks);
    const std::string backend = resolve_allscan(c.allscan, rt.dev->is_gpu());
    if (is_device_allscan(backend)) {
#ifdef SPB_HAVE_CUDA
      try {
        device_scan_ = make_device_all_scan(rt, c.local.state_elems(), backend);  // every rank agrees on reach
      } catch (const UsageError& e) {
        if (c.allscan != "auto") throw;
        notice_ = std::string("zeco: the device All-Scan is unavailable (") + e.what() + "); the host All-Scan over " +
                  rt.comm->name() + " runs instead";
      }
#else
      throw UsageError("--allscan " + c.allscan + ": this spbench was built without CUDA");
#endif
    }
  }

  std::string comm_backend() const override { return device_scan_ ? device_scan_->backend() : ""; }
  std::string notice() const override { return notice_; }

  void forward(const SpForwardArgs& a) override {
    Device& dev = *rt_.dev;
    // In order, gc on the communication stream (idle until the scan) beside the boundary kernel where that reads the
    // raw gates: the scan then has nothing of the compute stream's critical path beside it.
    if (cfg_.overlap) local_.forward_local_states(a);
    else local_.forward_boundary(a, /*gates_on_comm=*/true);
    dev.record(ready_.get(), dev.compute_stream());
    dev.wait(dev.comm_stream(), ready_.get());
    scan(ScanDirection::forward, local_.local_final(), a.h0, local_.S_in(), a.h_out);
    dev.record(scanned_.get(), dev.comm_stream());
    if (cfg_.overlap) {
      local_.forward_local_output(a);  // overlaps the All-Scan
      dev.wait(dev.compute_stream(), scanned_.get());
      local_.forward_apply_initial(a);
    } else {
      local_.forward_gates(a);  // overlaps the All-Scan (where it did not run beside the boundary kernel)
      dev.wait(dev.compute_stream(), scanned_.get());
      local_.forward_output_from_initial(a);
    }
  }

  void finish() override {
#ifdef SPB_HAVE_CUDA
    if (device_scan_) device_scan_->check(rt_.dev->comm_stream());
#endif
  }

  void backward(const SpForwardArgs& f, const SpBackwardArgs& a) override {
    Device& dev = *rt_.dev;
    local_.backward_boundary(f, a);
    dev.record(ready_.get(), dev.compute_stream());
    dev.wait(dev.comm_stream(), ready_.get());
    scan(ScanDirection::reverse, local_.local_dh_in(), a.dht, local_.dS_out(), a.dh_in);
    dev.record(scanned_.get(), dev.comm_stream());
    local_.backward_true_states();  // overlaps the reverse All-Scan (only the overlapped forward leaves work here)
    dev.wait(dev.compute_stream(), scanned_.get());
    local_.backward_finish(f, a);
  }

 private:
  void scan(ScanDirection dir, const float* local, const float* first, float* carry_in, float* carry_out) {
    TimelineSpan span(rt_, dir == ScanDirection::forward ? "allscan" : "allscan_reverse", true);
    AllScanArgs s;
    s.direction = dir;
    s.rows = cfg_.local.state_rows();
    s.cols = cfg_.local.dv;
    s.blocks = cfg_.blocks;
    s.decay = local_.lambda();
    s.local = local;
    s.first = first;
    s.carry_in = carry_in;
    s.carry_out = carry_out ? carry_out : local_.spare_state();
    if (device_scan_) device_scan_->run(s, rt_.dev->comm_stream());
    else all_scan_host(rt_, s, rt_.dev->comm_stream());
  }

  Runtime& rt_;
  SpConfig cfg_;
  std::string notice_;
  SpLocalGla local_;
  EventHandle ready_, scanned_;
#ifdef SPB_HAVE_CUDA
  std::unique_ptr<DeviceAllScan> device_scan_;
#else
  struct None {
    void run(const AllScanArgs&, Stream) {}
    std::string backend() const { return ""; }
  };
  std::unique_ptr<None> device_scan_;
#endif
};

}  // namespace
}  // namespace spb

using spb::Zeco;
SPB_REGISTER_METHOD("zeco", "ZeCO: All-Scan of one state, pipelined in K blocks, overlapped with the local compute", Zeco)
