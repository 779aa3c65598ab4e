// All-Scan (ZeCO): the exclusive scan over ranks of the rank map  S -> A_p S + local_p (sp/rank_map.h; GLA's is
// A_p = diag(exp decay_p)), pipelined in K blocks of the state that the map folds independently (GLA: whole state
// rows, since rows decay independently). Block k of a rank's output needs only block k of its input: rank p forwards
// block k to the next rank as soon as it has it, and the scan costs about one state's transfer plus P-1 block hops
// instead of P-1 whole-state hops.
//
// Forward direction: rank 0 starts from `first` (h0), carry_in(p) = S_in(p), carry_out(p) = S_in(p+1).
// Reverse direction: rank P-1 starts from `first` (dht), carry_in(p) = dS_out(p), carry_out(p) = dS_out(p-1);
// rank 0's carry_out is dh0 of the whole sequence.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "sp/rank_map.h"
#include "sp/runtime.h"

namespace spb {

enum class ScanDirection { forward, reverse };

struct AllScanArgs {
  ScanDirection direction = ScanDirection::forward;
  size_t rows = 0, cols = 0;          // the state as a rows x cols fp32 matrix
  int blocks = 1;                     // K; must split the state along the map's block axis (GLA: divide rows)
  RankMapType map;                    // the family's kind of rank map (default: GLA's diagonal decay)
  const float* transition = nullptr;  // [map.transition_elems(rows, cols)] this rank's A_p (GLA: [rows] its total
                                      // log-decay, row r decaying by exp(transition[r]))
  const float* local = nullptr;       // [rows, cols] this rank's own contribution (M_p or D_p)
  const float* first = nullptr;       // [rows, cols] the scan's start (nullptr: zero); the chain reads it on the
                                      // first rank, the node-aware scans on other ranks too, so give the same on
                                      // every rank
  float* carry_in = nullptr;          // [rows, cols] out: what reached this rank
  float* carry_out = nullptr;         // [rows, cols] out: A_p carry_in + local, handed on
};

// The rank map a's scan folds with: a.map over a.rows x a.cols, on rt's kernels and device.
RankMap rank_map_of(Runtime& rt, const AllScanArgs& a);
// For a scan that runs GLA's diagonal map alone (the device kernel folds diag(exp transition) itself in blocks of rows;
// the node-aware scans size their scratch and transfers by it): UsageError naming `scan` and saying `why` where a.map
// is not the diagonal-decay map.
void require_diagonal_decay(const AllScanArgs& a, const std::string& scan,
                            const std::string& why = "folds diag(exp decay) inside its kernel, in blocks of state rows");

// Any All-Scan backend: the host-driven scans below, the device kernel (zeco/all_scan_device.h) and the rail scan
// across nodes. make_all_scan picks one by the name --allscan gives.
class AllScan {
 public:
  virtual ~AllScan() = default;
  // all_scan_host's contract, on `st`. Calls of one object are ordered on one stream (scratch and windows are kept
  // between calls); a.rows and a.rows * a.cols stay within the capacity given at creation.
  virtual void run(const AllScanArgs& a, Stream st) = 0;
  // Waits for `st` and throws spb::Error naming the rank that did not arrive where a device kernel gave up waiting
  // for a peer; the host-driven scans have nothing to check (their waits are the communicator's).
  virtual void check(Stream st) { (void)st; }
  // The name a row records in `backend` (allscan_names() below, resolved).
  virtual std::string backend() const = 0;
};

// The host-driven All-Scan over the runtime's communicator (MPI on CPU ranks, NCCL on GPUs): per block a recv, a
// fold and a send, all ordered on `st`. The chain: P - 1 hops, one after the other. With `segment` > 0 the chain
// runs inside every group of `segment` consecutive ranks at once (the nodes of a rail scan), each group's first rank
// in scan order starting from `first`.
void all_scan_host(Runtime& rt, const AllScanArgs& a, Stream st, int segment = 0);

// The host-driven All-Scans that know the nodes (DESIGN §10; the nodes are rt.topo's), over the same communicator with
// point-to-point calls only, the arithmetic in the rank map's (sp/rank_map.h; GLA's on GlaKernels::state_fold and
// vec_add), so one code runs on CPU ranks and GPUs. Rank p's map is x -> A x + b with A = its transition, b = its
// local state, and maps compose: (A2, b2) after (A1, b1) = (A2 A1, A2 b1 + b2) (GLA: A = diag(exp a), composed as
// a1 + a2 in the log domain). In scan order (forward: rank order; reverse: the opposite, nodes mirrored), each call
//   1. chains the ranks of every node, all nodes at once, from a zero state: rank i of a node gets the composition of
//      the node's ranks before it, (A_loc, B_loc): the transitions once as a whole, then the states in K blocks;
//   2. scans the node aggregates, which the node's last rank in scan order (its leader here) holds after step 1,
//      between the leaders: `host-hier` as a chain of K pipelined blocks (nodes - 1 network hops, each leader
//      forwarding block k as soon as its node's block k is in), `host-logdepth` by recursive doubling on whole states
//      (scan_nodes_by_doubling); the leader of node n then holds X_n, the state entering its node;
//   3. the leader sends X_n to the other ranks of its node (grouped), and every rank applies it:
//      carry_in = A_loc X_n + B_loc, carry_out = A_p carry_in + local.
// Latency: R - 1 + (nodes - 1) + 1 hops for host-hier and R - 1 + log2(nodes) + 1 for host-logdepth (R ranks per
// node), against P - 1 for the chain. The results equal the sequential fold up to rounding (the transitions are
// composed first, GLA's decays summed before exp, and the folds are regrouped). On one node both are the chain. Every
// step is a host-launched call per block: the rail scan (zeco/all_scan_rail.h) is what composes the fast parts.
class HostAllScan final : public AllScan {
 public:
  // Collective: every rank, the same variant (`host`, `host-hier` or `host-logdepth`) and capacity. UsageError where
  // the variant cannot run on rt.topo (nodes of unequal or interleaved ranks).
  HostAllScan(Runtime& rt, const std::string& variant, size_t max_rows, size_t max_elems);
  void run(const AllScanArgs& a, Stream st) override;
  std::string backend() const override { return variant_; }
  const std::string& variant() const { return variant_; }

 private:
  void run_across_nodes(const AllScanArgs& a, Stream st);

  Runtime& rt_;
  std::string variant_;
  size_t max_rows_, max_elems_;
  Buffer a_loc_, a_node_, x_;     // A_loc, A_p after A_loc, X_n (the transitions: a diagonal map's, max_rows)
  Buffer got_a_, got_b_, exc_a_;  // host-logdepth: what arrives, the exclusive aggregate's transition
};

// Scan order: the world rank at place u of a scan in direction `dir` (forward: rank order; reverse: the opposite).
inline int scan_rank_at(ScanDirection dir, int world, int u) { return dir == ScanDirection::forward ? u : world - 1 - u; }

// Recursive doubling between the nodes' members of a scan across nodes, one member a node: member n at scan place v,
// member n + d at place v + d * stride. On entry (inc_a, inc_b) is member n's node aggregate under `map` (its
// transition, its state of map.rows() x map.cols()); ceil(log2 nodes) exchange steps: at distance d = 1, 2, 4, ...
// each member sends its inclusive aggregate to the member d nodes on and composes what arrives from d nodes back into
// its inclusive and its exclusive aggregate. On return x = X_n, the state entering node n (`first`, or zero, carried
// through the nodes before it); x holds the exclusive aggregate's state on the way, and inc_a and inc_b are left as
// scratch. got_b holds a state, got_a and exc_a a transition.
struct DoublingScratch {
  float *got_a, *got_b, *exc_a;
};
void scan_nodes_by_doubling(Runtime& rt, ScanDirection dir, int v, int stride, int n, int nodes, const RankMap& map,
                            float* inc_a, float* inc_b, const float* first, float* x, const DoublingScratch& s,
                            Stream st);

// Checks K against the state; throws UsageError naming the flag.
void validate_blocks(size_t rows, int blocks);
// The same against the map's block axis (rows: the message above), after RankMap::require_arithmetic: what every
// host-driven scan checks before its first transfer.
void validate_blocks(const RankMap& map, int blocks);

// The All-Scan backends, as --allscan names them (and as the `backend` column of a result row records them):
//   host           all_scan_host over the runtime's communicator (MPI on CPU ranks, NCCL on GPUs)
//   host-hier      HostAllScan: each node's chain, a chain between the nodes, the nodes' prefix applied
//   host-logdepth  HostAllScan: each node's chain, recursive doubling between the nodes, the prefix applied
//   device-flag    the device kernel, K blocks per call, a fence and a release flag per block piece
//   device-ll      the device kernel, {value, tag} 8-byte words: no fence, no flag (zeco/all_scan_device_protocols.cu)
//   device-ll16    the device kernel, {3 values, tag} 16-byte words
//   device         the default device protocol (kDefaultDeviceAllScan)
//   rail           RailAllScan (zeco/all_scan_rail.h): each node's device All-Scan (the chain on CPU ranks), the
//                  node aggregates' rows split over the node's GPUs, each GPU's share chained between the nodes over
//                  its own NIC, the nodes' prefix gathered in the node and applied
//   rail-logdepth  the same with recursive doubling between the nodes
//   auto           rail-logdepth where the world spans several nodes (rt.topo), else the default device protocol on
//                  GPUs and host on CPUs
// Rows written before the protocols had names say `device` for device-flag.
extern const char* const kDefaultDeviceAllScan;
const std::vector<std::string>& allscan_names();  // what --allscan accepts
// The name a row records for `name` on this topology; UsageError for a name that does not exist, a device one on
// CPUs, or a node-aware one on nodes of unequal or interleaved ranks.
std::string resolve_allscan(const std::string& name, bool gpu, const Topology& topo = Topology{});
bool is_device_allscan(const std::string& resolved);
bool is_node_aware_allscan(const std::string& resolved);  // host-hier, host-logdepth, rail, rail-logdepth
bool is_rail_allscan(const std::string& resolved);        // rail, rail-logdepth

// The All-Scan `name` (as --allscan takes it; resolve_allscan) for states of up to max_rows rows and max_elems
// elements. `ctas`: the device kernel's CTAs where SPB_ALLSCAN_CTAS does not set them (0: its default). Where `name`
// is `auto` and the device protocol is unavailable (no NVLink/P2P between the ranks), the host chain runs instead and
// *notice (where given) says so; any other name that cannot run here is a UsageError. Collective.
std::unique_ptr<AllScan> make_all_scan(Runtime& rt, const std::string& name, size_t max_rows, size_t max_elems,
                                       int ctas = 0, std::string* notice = nullptr);

}  // namespace spb
