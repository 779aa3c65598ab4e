// The rail All-Scan: zeco/all_scan_rail.h says what each step does.
#include "zeco/all_scan_rail.h"

#include <algorithm>
#include <utility>

#include "runtime/error.h"

namespace spb {
namespace {

class RailAllScan final : public AllScan {
 public:
  RailAllScan(Runtime& rt, std::string variant, size_t max_rows, size_t max_elems, std::unique_ptr<AllScan> node_scan)
      : rt_(rt), variant_(std::move(variant)), max_rows_(max_rows), max_elems_(max_elems),
        node_scan_(std::move(node_scan)) {
    SPB_USAGE(is_rail_allscan(variant_), "--allscan " + variant_ + ": not a rail All-Scan");
    SPB_USAGE(rt.topo.regular() && rt.topo.ranks_per_node * rt.topo.nodes == rt.world(),
              "--allscan " + variant_ + ": the launch has " + rt.topo.describe() +
                  "; it needs nodes of equally many consecutive ranks");
    Device& dev = *rt.dev;
    // A share is a whole state at most (a state of one row leaves it all to one GPU).
    const size_t share_rows = max_rows, share_elems = max_elems;
    // (the transitions of a diagonal map, max_rows elements; step 1 scans them as states of one column)
    no_decay_ = Buffer(dev, max_rows * 4);
    RankMap(*rt.kern, dev, RankMapType::diagonal_decay(), max_rows, 1).identity(no_decay_.f32(), dev.compute_stream());
    dev.synchronize();
    a_loc_ = Buffer(dev, max_rows * 4);
    a_inc_ = Buffer(dev, max_rows * 4);
    x_ = Buffer(dev, max_elems * 4);
    share_a_ = Buffer(dev, share_rows * 4);
    share_b_ = Buffer(dev, share_elems * 4);
    if (variant_ != "rail-logdepth") return;
    got_a_ = Buffer(dev, share_rows * 4);
    exc_a_ = Buffer(dev, share_rows * 4);
    got_b_ = Buffer(dev, share_elems * 4);
  }

  std::string backend() const override { return variant_; }
  void check(Stream st) override {
    if (node_scan_) node_scan_->check(st);
  }

  void run(const AllScanArgs& a, Stream st) override {
    require_diagonal_decay(a, "--allscan " + backend(), "it composes a node's transitions by a scan of them as states");
    const RankMap map = rank_map_of(rt_, a);
    validate_blocks(map, a.blocks);
    SPB_CHECK(a.rows <= max_rows_ && a.rows * a.cols <= max_elems_ && map.transition_elems() <= max_rows_,
              "All-Scan of " + std::to_string(a.rows) + " x " + std::to_string(a.cols) + " past its capacity");
    // Step 1 composes the transitions inside the node by scanning them as states (sp/rank_map.h).
    const RankMap transitions = map.transition_scan_map();
    Communicator& comm = *rt_.comm;
    const int P = comm.size(), R = rt_.topo.ranks_per_node, N = rt_.topo.nodes;
    const ScanDirection dir = a.direction;
    auto rank_at = [&](int u) { return scan_rank_at(dir, P, u); };
    const int v = dir == ScanDirection::forward ? comm.rank() : P - 1 - comm.rank();  // this rank's place
    const int n = v / R, i = v % R;
    // GPU j's share of the state along the map's block axis (the rows): [row0(j), row0(j + 1)).
    auto row0 = [&](int j) { return map.block_extent() * size_t(j) / size_t(R); };
    auto share = [&](int j) { return map.block_part(row0(j), row0(j + 1) - row0(j)); };
    const RankMapPart own = share(i);
    const size_t mine = own.map.block_extent();
    float *a_loc = a_loc_.f32(), *a_inc = a_inc_.f32(), *x = x_.f32();

    // 1. Inside the node, from a zero state: A_loc (carry_out: this rank's transition after A_loc), then B_loc into
    //    carry_in (carry_out: what this rank's map makes of it, on the node's last rank the node's aggregate).
    AllScanArgs decays;
    decays.direction = dir, decays.rows = transitions.rows(), decays.cols = transitions.cols(), decays.blocks = 1;
    decays.map = transitions.type(), decays.transition = no_decay_.f32();
    decays.local = a.transition, decays.carry_in = a_loc, decays.carry_out = a_inc;
    AllScanArgs states = a;
    states.first = nullptr;
    node_step(decays, st);
    node_step(states, st);

    if (N > 1) {
      // 2. The node's last rank deals the aggregate's rows over the node; its own share stays where it is. The states
      //    go before the decays, large before small: SMPI 3.32 deadlocked on a group whose small (eager) message to a
      //    peer came before a large (rendezvous) one (seen with 128 KiB shares; MPI and NCCL take either order).
      const bool last = i == R - 1;
      float* share_a = last ? a_inc + own.transition_offset : share_a_.f32();
      float* share_b = last ? a.carry_out + own.state_offset : share_b_.f32();
      comm.group_start();
      for (int j = 0; j < R - 1; ++j) {
        const RankMapPart theirs = share(j);
        if (!last || theirs.map.block_extent() == 0) continue;
        comm.send(a.carry_out + theirs.state_offset, theirs.map.state_bytes(), rank_at(n * R + j), st);
        comm.send(a_inc + theirs.transition_offset, theirs.map.transition_bytes(), rank_at(n * R + j), st);
      }
      if (!last && mine > 0) {
        comm.recv(share_b, own.map.state_bytes(), rank_at(n * R + R - 1), st);
        comm.recv(share_a, own.map.transition_bytes(), rank_at(n * R + R - 1), st);
      }
      comm.group_end();

      // 3. This GPU's rail: its share of X_n into x's rows of that share.
      float* x_mine = x + own.state_offset;
      const float* first_mine = a.first ? a.first + own.state_offset : nullptr;
      if (mine > 0 && variant_ == "rail-logdepth") {
        // The share is left as scratch: on the last rank a_inc and carry_out, which step 4 writes anew.
        scan_nodes_by_doubling(rt_, dir, v, R, n, N, own.map, share_a, share_b, first_mine, x_mine,
                               {got_a_.f32(), got_b_.f32(), exc_a_.f32()}, st);
      } else if (mine > 0) {
        chain_between_nodes(a, v, n, N, R, own.map, share_a, share_b, first_mine, x_mine, st);
      }

      // 4. X_n gathered from the node's GPUs (node 0's is `first`, which every rank has).
      if (n > 0) {
        comm.group_start();
        for (int j = 0; j < R; ++j) {
          const RankMapPart theirs = share(j);
          if (j == i) continue;
          if (mine > 0) comm.send(x_mine, own.map.state_bytes(), rank_at(n * R + j), st);
          if (theirs.map.block_extent() > 0)
            comm.recv(x + theirs.state_offset, theirs.map.state_bytes(), rank_at(n * R + j), st);
        }
        comm.group_end();
      }
    }
    //    ... and applied to what the node's scan gave this rank.
    const float* entering = N > 1 && n > 0 ? x : a.first;
    if (entering) map.apply(a_loc, entering, a.carry_in, a.carry_in, st);
    map.apply(a.transition, a.carry_in, a.local, a.carry_out, st);
  }

 private:
  // Step 1's scan of every node's ranks: the device kernel where there is one, else the chain inside each node,
  // which stands for that kernel (a simulated device charges it so).
  void node_step(const AllScanArgs& s, Stream st) {
    if (node_scan_) return node_scan_->run(s, st);
    struct DeviceTransport {
      Device& dev;
      explicit DeviceTransport(Device& d) : dev(d) { dev.set_device_transport(true); }
      ~DeviceTransport() { dev.set_device_transport(false); }
    } on(*rt_.dev);
    all_scan_host(rt_, s, st, rt_.topo.ranks_per_node);
  }

  // Step 3 of `rail`: the chain of the nodes' shares (`share`, this GPU's part of the state) in pieces of the K
  // blocks' extent along the block axis, each forwarded to the next node as soon as it is in.
  void chain_between_nodes(const AllScanArgs& a, int v, int n, int N, int R, const RankMap& share,
                           const float* share_a, float* share_b, const float* first_mine, float* x_mine, Stream st) {
    Communicator& comm = *rt_.comm;
    Device& dev = *rt_.dev;
    const int P = comm.size();
    const size_t m = share.block_extent(), piece = rank_map_of(rt_, a).block_extent() / size_t(a.blocks);
    for (size_t r = 0; r < m; r += piece) {
      const RankMapPart p = share.block_part(r, std::min(piece, m - r));
      const size_t bytes = p.map.state_bytes();
      float* xp = x_mine + p.state_offset;
      if (n > 0) comm.recv(xp, bytes, scan_rank_at(a.direction, P, v - R), st);
      else if (first_mine) dev.copy(xp, first_mine + p.state_offset, bytes, st);
      else dev.fill_zero(xp, bytes, st);
      if (n == N - 1) continue;  // the last node hands nothing on
      float* out = share_b + p.state_offset;
      p.map.apply(share_a + p.transition_offset, xp, out, out, st);
      comm.send(out, bytes, scan_rank_at(a.direction, P, v + R), st);
    }
  }

  Runtime& rt_;
  std::string variant_;
  size_t max_rows_, max_elems_;
  std::unique_ptr<AllScan> node_scan_;  // the device kernel in segments of a node; null: the chain in each node
  Buffer no_decay_;                     // zeros: the identity's transition, the transitions' own in step 1
  Buffer a_loc_, a_inc_, x_;            // A_loc, this rank's transition after A_loc, X_n
  Buffer share_a_, share_b_;            // this GPU's share of the node aggregate (but on the node's last rank)
  Buffer got_a_, got_b_, exc_a_;         // rail-logdepth's scratch, a share each
};

}  // namespace

std::unique_ptr<AllScan> make_rail_all_scan(Runtime& rt, const std::string& variant, size_t max_rows,
                                            size_t max_elems, std::unique_ptr<AllScan> node_scan) {
  return std::make_unique<RailAllScan>(rt, variant, max_rows, max_elems, std::move(node_scan));
}

}  // namespace spb
