// The rail All-Scan (DESIGN §10; --allscan rail, rail-logdepth): ZeCO's scan across nodes from the fast parts. With
// rank p's map x -> A x + b (sp/rank_map.h; GLA's A = diag(exp a), a its decay, b its local state; maps compose as in
// zeco/all_scan.h) and R ranks in each of N nodes, in scan order (forward: rank order; reverse: the opposite, nodes
// mirrored), one call
//   1. scans inside every node from a zero state, all nodes at once: first the transitions (RankMap::
//      transition_scan_map: GLA's decays as a column with no decay of its own, so that it sums), then the states in
//      K blocks; rank i of a node gets (A_loc, B_loc), the composition of
//      the node's ranks before it. On GPUs both are the device All-Scan (one kernel, NVLink) in segments of R ranks;
//      elsewhere the chain over the communicator, which the simulated device charges as that kernel;
//   2. deals the node aggregate's rows, which the node's last rank holds after step 1, over the node's R GPUs
//      (grouped sends over NVLink): GPU i gets rows [i rows / R, (i + 1) rows / R). Rows decay independently, so
//   3. GPU i of every node scans its share of the aggregates with GPU i of the other nodes, its own rail (one NIC a
//      GPU on a DGX node): `rail` as a chain in pieces of K's block rows (N - 1 hops, each forwarded as it comes),
//      `rail-logdepth` by recursive doubling (ceil(log2 N) exchange steps of the whole share); GPU i then holds
//      its share of X_n, the state entering its node;
//   4. gathers X_n inside the node (grouped sends over NVLink; node 0's X_n is `first` on every rank), and every rank
//      applies it: carry_in = A_loc X_n + B_loc, carry_out = A_p carry_in + local.
// Each NIC carries 1/R of one state per node boundary, where host-hier's leader carries the whole state over one.
// The results equal the sequential fold up to rounding (the decays are summed before exp, and the folds regrouped).
// zeco/NOTES.md ("The rail All-Scan") counts each step's hops, messages and bytes.
#pragma once

#include <memory>
#include <string>

#include "zeco/all_scan.h"

namespace spb {

// Collective. `node_scan`: the device All-Scan in segments of the node's ranks (make_device_all_scan's `segment`),
// or null for the chain inside each node over the communicator. UsageError where rt.topo's nodes are not regular.
std::unique_ptr<AllScan> make_rail_all_scan(Runtime& rt, const std::string& variant, size_t max_rows,
                                            size_t max_elems, std::unique_ptr<AllScan> node_scan);

}  // namespace spb
