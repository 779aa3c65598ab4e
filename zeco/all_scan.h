// All-Scan (ZeCO): the exclusive scan over ranks of the affine map  S -> diag(exp decay_p) S + local_p,
// pipelined in K blocks of whole state rows. Rows decay independently (the decay is diagonal in dk), so block k of
// a rank's output needs only block k of its input: rank p forwards block k to the next rank as soon as it has it,
// and the scan costs about one state's transfer plus P-1 block hops instead of P-1 whole-state hops.
//
// Forward direction: rank 0 starts from `first` (h0), carry_in(p) = S_in(p), carry_out(p) = S_in(p+1).
// Reverse direction: rank P-1 starts from `first` (dht), carry_in(p) = dS_out(p), carry_out(p) = dS_out(p-1);
// rank 0's carry_out is dh0 of the whole sequence.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sp/runtime.h"

namespace spb {

enum class ScanDirection { forward, reverse };

struct AllScanArgs {
  ScanDirection direction = ScanDirection::forward;
  size_t rows = 0, cols = 0;     // the state as a rows x cols fp32 matrix; row r decays by exp(decay[r])
  int blocks = 1;                // K; must divide rows
  const float* decay = nullptr;  // [rows] this rank's total log-decay
  const float* local = nullptr;  // [rows, cols] this rank's own contribution (M_p or D_p)
  const float* first = nullptr;  // [rows, cols] the scan's start (nullptr: zero); the chain reads it on the first
                                 // rank, host-hier on node 0's leader, host-logdepth on every node's leader, so give
                                 // the same on every rank
  float* carry_in = nullptr;     // [rows, cols] out: what reached this rank
  float* carry_out = nullptr;    // [rows, cols] out: diag(exp decay) carry_in + local, handed on
};

// The host-driven All-Scan over the runtime's communicator (MPI on CPU ranks, NCCL on GPUs): per block a recv, a
// fold and a send, all ordered on `st`. The chain: P - 1 hops, one after the other.
void all_scan_host(Runtime& rt, const AllScanArgs& a, Stream st);

// The host-driven All-Scans that know the nodes (DESIGN §10; the nodes are rt.topo's), over the same communicator with
// point-to-point calls only, the arithmetic in GlaKernels::state_fold and vec_add, so one code runs on CPU ranks and
// GPUs. Rank p's map is x -> diag(exp a) x + b with a = its decay, b = its local state, and maps compose:
// (a2, b2) after (a1, b1) = (a1 + a2, diag(exp a2) b1 + b2), a in the log domain. In scan order (forward: rank order;
// reverse: the opposite, nodes mirrored), each call
//   1. chains the ranks of every node, all nodes at once, from a zero state: rank i of a node gets the composition of
//      the node's ranks before it, (A_loc, B_loc): the decays once as a whole, then the states in K blocks;
//   2. scans the node aggregates, which the node's last rank in scan order (its leader here) holds after step 1,
//      between the leaders: `host-hier` as a chain of K pipelined blocks (nodes - 1 network hops, each leader
//      forwarding block k as soon as its node's block k is in), `host-logdepth` by recursive doubling on whole states
//      (ceil(log2 nodes) exchange steps: at distance d = 1, 2, 4, ... each leader sends its inclusive aggregate to the
//      leader d nodes on and composes what arrives from d nodes back into its inclusive and its exclusive aggregate);
//      the leader of node n then holds X_n, the state entering its node;
//   3. the leader sends X_n to the other ranks of its node (grouped), and every rank applies it:
//      carry_in = diag(exp A_loc) X_n + B_loc, carry_out = diag(exp decay) carry_in + local.
// Latency: R - 1 + (nodes - 1) + 1 hops for host-hier and R - 1 + log2(nodes) + 1 for host-logdepth (R ranks per
// node), against P - 1 for the chain. The results equal the sequential fold up to rounding (the decays are summed
// before exp, and the folds are regrouped). On one node both are the chain.
class HostAllScan {
 public:
  // Collective: every rank, the same variant (`host`, `host-hier` or `host-logdepth`) and capacity. UsageError where
  // the variant cannot run on rt.topo (nodes of unequal or interleaved ranks).
  HostAllScan(Runtime& rt, const std::string& variant, size_t max_rows, size_t max_elems);
  // all_scan_host's contract; a.rows <= max_rows, a.rows * a.cols <= max_elems. Scratch is kept between calls, so
  // calls of one object must be ordered on one stream.
  void run(const AllScanArgs& a, Stream st);
  const std::string& variant() const { return variant_; }

 private:
  void run_across_nodes(const AllScanArgs& a, Stream st);

  Runtime& rt_;
  std::string variant_;
  size_t max_rows_, max_elems_;
  Buffer a_loc_, a_node_, x_;          // A_loc, A_loc + decay, X_n
  Buffer got_a_, got_b_, exc_a_, exc_b_;  // host-logdepth: what arrives, the exclusive aggregate
};

// Checks K against the state; throws UsageError naming the flag.
void validate_blocks(size_t rows, int blocks);

// The All-Scan backends, as --allscan names them (and as the `backend` column of a result row records them):
//   host           all_scan_host over the runtime's communicator (MPI on CPU ranks, NCCL on GPUs)
//   host-hier      HostAllScan: each node's chain, a chain between the nodes, the nodes' prefix applied
//   host-logdepth  HostAllScan: each node's chain, recursive doubling between the nodes, the prefix applied
//   device-flag    the device kernel, K blocks per call, a fence and a release flag per block piece
//   device-ll      the device kernel, {value, tag} 8-byte words: no fence, no flag (zeco/all_scan_device_protocols.cu)
//   device-ll16    the device kernel, {3 values, tag} 16-byte words
//   device         the default device protocol (kDefaultDeviceAllScan)
//   auto           host-hier where the world spans several nodes (rt.topo), else the default device protocol on
//                  GPUs and host on CPUs
// Rows written before the protocols had names say `device` for device-flag.
extern const char* const kDefaultDeviceAllScan;
const std::vector<std::string>& allscan_names();  // what --allscan accepts
// The name a row records for `name` on this topology; UsageError for a name that does not exist, a device one on
// CPUs, or a host-hier / host-logdepth on nodes of unequal or interleaved ranks.
std::string resolve_allscan(const std::string& name, bool gpu, const Topology& topo = Topology{});
bool is_device_allscan(const std::string& resolved);
bool is_node_aware_allscan(const std::string& resolved);  // host-hier, host-logdepth

}  // namespace spb
