// ZeCO (DESIGN §3): S_in and dS_out by All-Scan, K blocks pipelined along the state's rows, on the communication
// stream. In order (the default), a rank computes only its boundary state before the scan and everything else from
// the true incoming state after it; with --overlap 1 the output from zero-start states overlaps the forward scan and
// is corrected after it; with --overlap 2 the chunk states run beside each scan and take the incoming state as it
// arrives, so that neither scan stands between two kernels (SpLocalGla says what each order costs). The device
// All-Scan then runs on few CTAs (kBesideCtas), so that it shares the GPU with the chunk states' one wave. Not the
// default: on one H200 (P = 1, where there is no scan to hide) it costs ~50 us more than in order, most of it in the
// states kernel that takes a late state (zeco/NOTES.md, "The chunk states beside the scan"); P = 4 is not yet
// measured.
// In order, the heads may be split into groups (--head-groups N; default 1), each scanned on its own: group i's scan
// runs while group i+1's boundary kernel runs, and the last group's while the first group's outputs (or gradients)
// are computed, so that neither direction's scan leaves the GPU idle. Heads are independent under the rank map
// (sp/rank_map.h: RankMap::rows_part), so a group's scan is the All-Scan of its rows of the state. Groups alternate
// between the two compute streams (SpLocalGla::stream), and group i's boundary kernel starts once group i - 1's has
// finished. Not the default: on an H200 the split costs more than the ~10-30 us of scan it hides (on one stream each
// launch's last wave; on two streams a group's boundary kernel costs ~3/4 of the whole one; zeco/NOTES.md, "Head
// groups"); where the scan is slower (across nodes), it may pay.
#include <algorithm>
#include <memory>
#include <vector>

#include "runtime/error.h"
#include "sp/method.h"
#include "sp/sp_local.h"
#include "sp/timeline.h"
#include "zeco/all_scan.h"

namespace spb {
namespace {

// The device All-Scan's CTAs beside the chunk states (--overlap 2; SPB_ALLSCAN_CTAS overrides): their kernel fills
// 128 of an H100 / H200's 132 SMs with one block each at the paper's shapes, and a scan CTA of 512 threads does not fit
// beside one; the 4 SMs left hold 16. Measured on one H200 (zeco/NOTES.md, "The chunk states beside the scan"):
// 4 CTAs take 63-72 us for a 1 MiB state beside the states (each thread's units one after another, under the states'
// memory traffic), 16 take 18-20 and 128 take 8, neither delaying the states; 16 give the fastest operator (8 units
// per thread and round are slower at every count).
constexpr int kBesideCtas = 16;

class Zeco final : public SpMethod {
 public:
  Zeco(Runtime& rt, const SpConfig& c)
      : rt_(rt),
        cfg_(c),
        local_(make_sp_local(rt, c, SpLocalGla::head_groups_for(c))) {
    validate_blocks(local_->map(), c.blocks);
    column_blocked_ = local_->map().block_axis() == BlockAxis::cols && c.blocks > 1;
    if (column_blocked_)
      for (Buffer* b : {&blocked_local_, &blocked_first_, &blocked_in_, &blocked_out_})
        *b = Buffer(*rt.dev, local_->map().state_bytes());
    for (int i = 0; i < local_->groups(); ++i) {
      ready_.push_back(std::make_unique<EventHandle>(*rt.dev, EventUse::order));
      scanned_.push_back(std::make_unique<EventHandle>(*rt.dev, EventUse::order));
    }
    const std::string allscan = allscan_for(c);
    const std::string backend = resolve_allscan(allscan, rt.dev->is_gpu(), rt.topo);
    if (c.allscan == "auto" && is_node_aware_allscan(backend))
      notice_ = "zeco: --allscan auto runs " + backend + " (" + rt.topo.describe() + ")";
    if (allscan != c.allscan)
      notice_ = "zeco: --allscan auto runs the host chain: the " + std::string(local_->map().type().name()) +
                " rank map (Gated DeltaNet) has no device or node-aware All-Scan yet";
    std::string fallback;
    // (its rows' capacity holds the transition too: GLA's is a row each, Gated DeltaNet's dk x dk per head)
    const size_t max_rows = std::max(c.local.state_rows(), local_->map().transition_elems());
    scan_ = make_all_scan(rt, allscan, max_rows, c.local.state_elems(),
                          c.overlap == SpOverlap::states ? kBesideCtas : 0, &fallback);
    if (!fallback.empty()) notice_ += (notice_.empty() ? "zeco: " : "; ") + fallback;
  }

  // The device protocol, or the node-aware scan; "" for the chain over the communicator.
  std::string comm_backend() const override { return scan_->backend() == "host" ? "" : scan_->backend(); }
  int head_groups() const override { return local_->groups(); }
  std::string notice() const override { return notice_; }
  bool takes_grad_ld() const override { return true; }  // its gradients are SpLocalGla's chunk_grads

  void forward(const SpForwardArgs& a) override {
    Device& dev = *rt_.dev;
    if (cfg_.overlap == SpOverlap::states) {
      local_->forward_boundary(a, /*gates_on_comm=*/true);
      start_scan(ScanDirection::forward, 0, local_->local_final(), a.h0, local_->S_in(), a.h_out);
      local_->forward_states_beside(a);  // beside the All-Scan
      dev.wait(dev.compute_stream(), scanned_[0]->get());
      local_->forward_output_after_arrival(a);
      return;
    }
    if (cfg_.overlap == SpOverlap::output) {
      local_->forward_local_states(a);
      start_scan(ScanDirection::forward, 0, local_->local_final(), a.h0, local_->S_in(), a.h_out);
      local_->forward_local_output(a);  // overlaps the All-Scan
      dev.wait(dev.compute_stream(), scanned_[0]->get());
      local_->forward_apply_initial(a);
      return;
    }
    // gc on the communication stream (idle until the first scan) beside the first boundary kernel where that reads
    // the raw gates.
    const bool two = local_->groups() > 1;
    if (two) local_->fork();
    for (int i = 0; i < local_->groups(); ++i) {
      after_previous_boundary(i);
      local_->forward_boundary(a, /*gates_on_comm=*/true, i);
      start_scan(ScanDirection::forward, i, local_->local_final(), a.h0, local_->S_in(), a.h_out);
    }
    // Overlaps the All-Scan (where the boundary calls did not leave gc); the second stream's outputs read it too.
    if (local_->forward_gates(a) && two) local_->fork();
    for (int i = 0; i < local_->groups(); ++i) {
      dev.wait(local_->stream(i), scanned_[i]->get());
      local_->forward_output_from_initial(a, i);
    }
    if (two) local_->join();
  }

  void finish() override { scan_->check(rt_.dev->comm_stream()); }

  void backward(const SpForwardArgs& f, const SpBackwardArgs& a) override {
    Device& dev = *rt_.dev;
    if (cfg_.overlap == SpOverlap::states) {
      local_->backward_boundary(f, a);
      start_scan(ScanDirection::reverse, 0, local_->local_dh_in(), a.dht, local_->dS_out(), a.dh_in);
      local_->backward_states_beside(f, a);  // beside the reverse All-Scan
      dev.wait(dev.compute_stream(), scanned_[0]->get());
      local_->backward_finish_after_arrival(f, a);
      return;
    }
    const bool two = local_->groups() > 1;
    if (two) local_->fork();  // the second stream after do (and the forward)
    for (int i = 0; i < local_->groups(); ++i) {
      after_previous_boundary(i);
      local_->backward_boundary(f, a, i);
      start_scan(ScanDirection::reverse, i, local_->local_dh_in(), a.dht, local_->dS_out(), a.dh_in);
    }
    local_->backward_true_states();  // overlaps the reverse All-Scan (only the overlapped forward leaves work here)
    for (int i = 0; i < local_->groups(); ++i) {
      dev.wait(local_->stream(i), scanned_[i]->get());
      local_->backward_finish(f, a, i);
    }
    if (two) local_->join();
  }

 private:
  // Group i's boundary kernel starts once group i - 1's has finished (on the other stream), so that one group's
  // scan and later stages run beside the next group's boundary kernel instead of all boundary kernels sharing the
  // GPU and all scans starting together.
  void after_previous_boundary(int i) {
    if (i > 0 && local_->lane(i) != local_->lane(i - 1)) rt_.dev->wait(local_->stream(i), ready_[i - 1]->get());
  }

  // The All-Scan of head group i's rows of the states (whole states: pointers to row 0), on the communication stream
  // once the group's stream's work so far is done (ready_[i]); scanned_[i] marks its end.
  void start_scan(ScanDirection dir, int i, const float* local, const float* first, float* carry_in,
                  float* carry_out) {
    Device& dev = *rt_.dev;
    dev.record(ready_[i]->get(), local_->stream(i));
    dev.wait(dev.comm_stream(), ready_[i]->get());
    {
      TimelineSpan span(rt_, dir == ScanDirection::forward ? "allscan" : "allscan_reverse", Lane::comm);
      const GlaShape& g = local_->group(i);
      // The group's heads: their rows of the state and their part of the transition.
      const RankMapPart part = local_->map().rows_part(size_t(g.pair_begin) * g.dk, size_t(g.pairs()) * g.dk);
      const size_t at = part.state_offset;
      AllScanArgs s;
      s.direction = dir;
      s.rows = part.map.rows();
      s.cols = part.map.cols();
      s.blocks = cfg_.blocks;
      s.map = part.map.type();
      s.transition = (dir == ScanDirection::forward ? local_->transition() : local_->reverse_transition()) +
                     part.transition_offset;
      s.local = local + at;
      s.first = first ? first + at : nullptr;
      s.carry_in = carry_in + at;
      s.carry_out = (carry_out ? carry_out : local_->spare_state()) + at;
      if (column_blocked_) scan_column_blocks(s);
      else scan_->run(s, dev.comm_stream());
    }
    if (cfg_.overlap == SpOverlap::states) local_->signal_arrival(dir == ScanDirection::forward, dev.comm_stream());
    dev.record(scanned_[i]->get(), dev.comm_stream());
  }

  // A dense map's K column blocks (RankMap::block): the scan runs on column-blocked copies of its states, on the
  // communication stream (one group: the dense family has no head groups). Two state copies on each side of the
  // scan, about 4 MiB of traffic at 16 heads of 128 x 128, against a state's transfer per hop.
  void scan_column_blocks(AllScanArgs s) {
    const Stream cs = rt_.dev->comm_stream();
    GlaKernels& kern = *rt_.kern;
    float* const in = s.carry_in;
    float* const out = s.carry_out;
    column_blocks_pack(kern, s.rows, s.cols, s.blocks, s.local, blocked_local_.f32(), cs);
    s.local = blocked_local_.f32();
    if (s.first) {
      column_blocks_pack(kern, s.rows, s.cols, s.blocks, s.first, blocked_first_.f32(), cs);
      s.first = blocked_first_.f32();
    }
    s.carry_in = blocked_in_.f32(), s.carry_out = blocked_out_.f32();
    scan_->run(s, cs);
    column_blocks_unpack(kern, s.rows, s.cols, s.blocks, blocked_in_.f32(), in, cs);
    column_blocks_unpack(kern, s.rows, s.cols, s.blocks, blocked_out_.f32(), out, cs);
  }

  // --allscan for c: a dense map (Gated DeltaNet) runs on the host chain alone, so `auto` means it there and any
  // other name but `host` is a UsageError.
  static std::string allscan_for(const SpConfig& c) {
    if (c.attention == Attention::gla) return c.allscan;
    if (c.allscan == "auto") return "host";
    SPB_USAGE(c.allscan == "host", "--allscan " + c.allscan +
                                       ": Gated DeltaNet's dense rank map runs on the host chain only so far "
                                       "(--allscan host or auto)");
    return c.allscan;
  }

  Runtime& rt_;
  SpConfig cfg_;
  std::string notice_;
  bool column_blocked_ = false;
  Buffer blocked_local_, blocked_first_, blocked_in_, blocked_out_;
  std::unique_ptr<SpLocal> local_;
  std::vector<std::unique_ptr<EventHandle>> ready_, scanned_;  // per head group
  std::unique_ptr<AllScan> scan_;
};

}  // namespace
}  // namespace spb

using spb::Zeco;
SPB_REGISTER_METHOD("zeco", "ZeCO: All-Scan of one state, pipelined in K blocks, overlapped with the local compute", Zeco)
