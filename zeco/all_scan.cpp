#include "zeco/all_scan.h"

#include <algorithm>
#include <string>

#include "runtime/error.h"
#include "zeco/all_scan_rail.h"
#ifdef SPB_HAVE_CUDA
#include "zeco/all_scan_device.h"
#endif

namespace spb {

void validate_blocks(size_t rows, int blocks) {
  SPB_USAGE(blocks >= 1 && rows % size_t(blocks) == 0,
            "--blocks: K=" + std::to_string(blocks) + " must be >= 1 and divide the state's rows B*H*dk=" +
                std::to_string(rows) + " (blocks are whole rows of dv elements)");
}

void validate_blocks(const RankMap& map, int blocks) {
  map.require_arithmetic();
  if (map.block_axis() == BlockAxis::rows) return validate_blocks(map.rows(), blocks);
  SPB_USAGE(map.splits_into(blocks), "--blocks: K=" + std::to_string(blocks) + " must be >= 1 and divide the state's " +
                                         std::to_string(map.cols()) + " columns (the " + map.type().name() +
                                         " rank map's blocks are whole columns)");
}

RankMap rank_map_of(Runtime& rt, const AllScanArgs& a) {
  return RankMap(*rt.kern, *rt.dev, a.map, a.rows, a.cols, rt.gdn.get());
}

void require_diagonal_decay(const AllScanArgs& a, const std::string& scan, const std::string& why) {
  SPB_USAGE(a.map.kind == TransitionKind::diagonal_decay,
            scan + ": " + why + "; the " + a.map.name() + " rank map (blocks of " +
                (a.map.block_axis() == BlockAxis::rows ? "rows" : "columns") + ") needs --allscan host");
}

const char* const kDefaultDeviceAllScan = "device-ll16";

const std::vector<std::string>& allscan_names() {
  static const std::vector<std::string> v = {"host",      "host-hier",   "host-logdepth", "rail", "rail-logdepth",
                                             "device",    "device-flag", "device-ll",     "device-ll16", "auto"};
  return v;
}

std::string resolve_allscan(const std::string& name, bool gpu, const Topology& topo) {
  const bool several_nodes = topo.nodes > 1 && topo.regular();
  const std::string r = name == "auto" ? (several_nodes ? "rail-logdepth" : gpu ? kDefaultDeviceAllScan : "host")
                        : name == "device" ? kDefaultDeviceAllScan
                                           : name;
  // "device" and "auto" resolved above, so what is left must be one of the concrete names.
  SPB_USAGE(r != "auto" && r != "device" && std::count(allscan_names().begin(), allscan_names().end(), r),
            "--allscan: '" + name + "' does not exist; choose one of host, host-hier, host-logdepth, rail, "
            "rail-logdepth, device, device-flag, device-ll, device-ll16, auto");
  SPB_USAGE(!is_device_allscan(r) || gpu, "--allscan " + name + ": needs --backend gpu");
  // The device protocol reaches its peers over NVLink, which simulated nodes over the network must not share.
  SPB_USAGE(!is_device_allscan(r) || !topo.over_network,
            "--allscan " + name + ": the device protocol runs inside one node; with --nodes-over-network use host, "
            "host-hier or host-logdepth");
  SPB_USAGE(!is_node_aware_allscan(r) || topo.regular(),
            "--allscan " + name + ": the launch has " + topo.describe() +
                "; it needs nodes of equally many consecutive ranks (mpirun --map-by ppr:N:node, srun --distribution=block) "
                "or --ranks-per-node");
  return r;
}

bool is_device_allscan(const std::string& resolved) { return resolved.rfind("device", 0) == 0; }
bool is_node_aware_allscan(const std::string& resolved) {
  return resolved == "host-hier" || resolved == "host-logdepth" || is_rail_allscan(resolved);
}
bool is_rail_allscan(const std::string& resolved) { return resolved == "rail" || resolved == "rail-logdepth"; }

void all_scan_host(Runtime& rt, const AllScanArgs& a, Stream st, int segment) {
  const RankMap map = rank_map_of(rt, a);
  validate_blocks(map, a.blocks);
  const int p = rt.comm->rank(), P = rt.comm->size();
  const int seg = segment > 0 ? segment : P;
  SPB_CHECK(P % seg == 0, "a chain in segments of " + std::to_string(seg) + " ranks over " + std::to_string(P));
  const bool fwd = a.direction == ScanDirection::forward;
  const int prev = fwd ? p - 1 : p + 1;  // where the carry comes from
  const int next = fwd ? p + 1 : p - 1;  // where it goes
  auto in_segment = [&](int q) { return q >= 0 && q < P && q / seg == p / seg; };
  const bool has_prev = in_segment(prev), has_next = in_segment(next);

  if (!has_prev) {
    if (a.first) rt.dev->copy(a.carry_in, a.first, map.state_bytes(), st);
    else rt.dev->fill_zero(a.carry_in, map.state_bytes(), st);
  }
  for (int b = 0; b < a.blocks; ++b) {
    const RankMapPart blk = map.block(b, a.blocks);
    const size_t off = blk.state_offset, block_bytes = blk.map.state_bytes();
    if (has_prev) rt.comm->recv(a.carry_in + off, block_bytes, prev, st);
    blk.map.apply(a.transition + blk.transition_offset, a.carry_in + off, a.local + off, a.carry_out + off, st);
    if (has_next) rt.comm->send(a.carry_out + off, block_bytes, next, st);
  }
}

void scan_nodes_by_doubling(Runtime& rt, ScanDirection dir, int v, int stride, int n, int nodes, const RankMap& map,
                            float* inc_a, float* inc_b, const float* first, float* x, const DoublingScratch& s,
                            Stream st) {
  Communicator& comm = *rt.comm;
  Device& dev = *rt.dev;
  const int P = comm.size();
  const size_t state_bytes = map.state_bytes(), transition_bytes = map.transition_bytes();
  // (inc_a, inc_b) is the composition of nodes [n - 2d + 1, n] after the step at distance d, (exc_a, x) that of
  // [n - 2d + 1, n - 1] (none yet while `exc_empty`: the first arrival lands there, no copy); what arrives covers
  // [n - 2d + 1, n - d] and goes before both.
  bool exc_empty = true;
  for (int d = 1; d < nodes; d *= 2) {
    const bool to = n + d < nodes, from = n - d >= 0;
    float *got_a = exc_empty ? s.exc_a : s.got_a, *got_b = exc_empty ? x : s.got_b;
    comm.group_start();
    if (to) {
      comm.send(inc_b, state_bytes, scan_rank_at(dir, P, v + d * stride), st);
      comm.send(inc_a, transition_bytes, scan_rank_at(dir, P, v + d * stride), st);
    }
    if (from) {
      comm.recv(got_b, state_bytes, scan_rank_at(dir, P, v - d * stride), st);
      comm.recv(got_a, transition_bytes, scan_rank_at(dir, P, v - d * stride), st);
    }
    comm.group_end();
    if (!from) continue;
    // What arrived goes first, the aggregate after it.
    if (!exc_empty) map.compose(s.exc_a, x, got_a, got_b, s.exc_a, x, st);
    if (n + 2 * d < nodes)  // the inclusive aggregate matters only while a later step sends it
      map.compose(inc_a, inc_b, got_a, got_b, inc_a, inc_b, st);
    exc_empty = false;
  }
  // X_n = the exclusive aggregate applied to the scan's start.
  if (exc_empty) {
    if (first) dev.copy(x, first, state_bytes, st);
    else dev.fill_zero(x, state_bytes, st);
  } else if (first) {
    map.apply(s.exc_a, first, x, x, st);
  }
}

HostAllScan::HostAllScan(Runtime& rt, const std::string& variant, size_t max_rows, size_t max_elems)
    : rt_(rt), variant_(resolve_allscan(variant, rt.dev->is_gpu(), rt.topo)), max_rows_(max_rows),
      max_elems_(max_elems) {
  SPB_USAGE(variant_ == "host" || is_node_aware_allscan(variant_),
            "--allscan " + variant + ": not a host-driven All-Scan");
  if (variant_ == "host" || rt.topo.nodes == 1) return;  // the chain: no scratch
  Device& dev = *rt.dev;
  a_loc_ = Buffer(dev, max_rows * 4);
  a_node_ = Buffer(dev, max_rows * 4);
  x_ = Buffer(dev, max_elems * 4);
  if (variant_ != "host-logdepth") return;
  got_a_ = Buffer(dev, max_rows * 4);
  exc_a_ = Buffer(dev, max_rows * 4);
  got_b_ = Buffer(dev, max_elems * 4);
}

void HostAllScan::run(const AllScanArgs& a, Stream st) {
  const RankMap map = rank_map_of(rt_, a);
  validate_blocks(map, a.blocks);
  SPB_CHECK(a.rows <= max_rows_ && a.rows * a.cols <= max_elems_ && map.transition_elems() <= max_rows_,
            "All-Scan of " + std::to_string(a.rows) + " x " + std::to_string(a.cols) + " past its capacity");
  if (variant_ == "host" || rt_.topo.nodes == 1) return all_scan_host(rt_, a, st);
  require_diagonal_decay(a, "--allscan " + variant_, "its scratch and its transfers between nodes hold a transition a row");
  run_across_nodes(a, st);
}

void HostAllScan::run_across_nodes(const AllScanArgs& a, Stream st) {
  Communicator& comm = *rt_.comm;
  Device& dev = *rt_.dev;
  const RankMap map = rank_map_of(rt_, a);
  const int P = comm.size(), R = rt_.topo.ranks_per_node, N = rt_.topo.nodes;
  SPB_CHECK(R >= 1 && R * N == P, "the topology (" + rt_.topo.describe() + ") is not this world of " + std::to_string(P));
  const bool fwd = a.direction == ScanDirection::forward;
  // Scan order: v is this rank's place in it, and the rank at place u is rank_at(u); reversed, node n of the scan is
  // node N - 1 - n of the world (R divides P), with its ranks in the opposite order.
  auto rank_at = [&](int u) { return scan_rank_at(a.direction, P, u); };
  const int v = fwd ? comm.rank() : P - 1 - comm.rank();
  const int n = v / R, i = v % R;
  const bool leader = i == R - 1;  // holds the node's aggregate after step 1
  const size_t state_bytes = map.state_bytes(), transition_bytes = map.transition_bytes();
  float *a_loc = a_loc_.f32(), *a_node = a_node_.f32(), *x = x_.f32();

  // 1. The node's chain from a zero state: A_loc first (small), then B_loc into carry_in, block by block; carry_out
  //    holds B_loc after this rank, on the leader the node's aggregate b. With host-hier the leader scans the nodes
  //    block by block too, as each block of its node's aggregate is in: x = X_n, carry_out = the X_n+1 it sends on.
  if (i == 0) map.identity(a_loc, st);
  else comm.recv(a_loc, transition_bytes, rank_at(v - 1), st);
  map.compose_transitions(a.transition, a_loc, a_node, st);  // this rank after the node's ranks before it
  if (!leader) comm.send(a_node, transition_bytes, rank_at(v + 1), st);
  if (i == 0) dev.fill_zero(a.carry_in, state_bytes, st);
  const bool chain_across = leader && variant_ == "host-hier";
  for (int k = 0; k < a.blocks; ++k) {
    const RankMapPart blk = map.block(k, a.blocks);
    const size_t off = blk.state_offset, toff = blk.transition_offset, block_bytes = blk.map.state_bytes();
    if (i > 0) comm.recv(a.carry_in + off, block_bytes, rank_at(v - 1), st);
    blk.map.apply(a.transition + toff, a.carry_in + off, a.local + off, a.carry_out + off, st);
    if (!leader) comm.send(a.carry_out + off, block_bytes, rank_at(v + 1), st);
    if (!chain_across) continue;
    if (n > 0) comm.recv(x + off, block_bytes, rank_at(v - R), st);
    else if (a.first) dev.copy(x + off, a.first + off, block_bytes, st);
    else dev.fill_zero(x + off, block_bytes, st);
    if (n == N - 1) continue;  // the last node's leader hands nothing on
    blk.map.apply(a_node + toff, x + off, a.carry_out + off, a.carry_out + off, st);
    comm.send(a.carry_out + off, block_bytes, rank_at(v + R), st);
  }

  // 2. host-logdepth: recursive doubling between the leaders, on whole states.
  if (leader && variant_ == "host-logdepth")
    scan_nodes_by_doubling(rt_, a.direction, v, R, n, N, map, a_node, a.carry_out, a.first, x,
                           {got_a_.f32(), got_b_.f32(), exc_a_.f32()}, st);

  // 3. The leader hands X_n to its node, and every rank applies it to what its node's chain gave it.
  if (leader && R > 1) {
    comm.group_start();
    for (int j = 0; j < R - 1; ++j) comm.send(x, state_bytes, rank_at(n * R + j), st);
    comm.group_end();
  } else if (!leader) {
    comm.recv(x, state_bytes, rank_at(n * R + R - 1), st);
  }
  map.apply(a_loc, x, a.carry_in, a.carry_in, st);
  map.apply(a.transition, a.carry_in, a.local, a.carry_out, st);
}

namespace {

// The device protocol `resolved`, or null where `name` is auto and the ranks cannot reach each other's memory
// (*notice then says so); a UsageError where a named device protocol cannot run here.
std::unique_ptr<AllScan> device_or_none(Runtime& rt, const std::string& name, const std::string& resolved,
                                        size_t max_elems, int ctas, int segment, std::string* notice) {
#ifdef SPB_HAVE_CUDA
  try {
    return make_device_all_scan(rt, max_elems, resolved, ctas, segment);  // every rank agrees on reach
  } catch (const UsageError& e) {
    if (name != "auto") throw;
    if (notice)
      *notice = std::string("the device All-Scan is unavailable (") + e.what() + "); the host chain over " +
                rt.comm->name() + " runs instead";
    return nullptr;
  }
#else
  (void)rt, (void)resolved, (void)max_elems, (void)ctas, (void)segment, (void)notice;
  throw UsageError("--allscan " + name + ": this spbench was built without CUDA");
#endif
}

}  // namespace

std::unique_ptr<AllScan> make_all_scan(Runtime& rt, const std::string& name, size_t max_rows, size_t max_elems,
                                       int ctas, std::string* notice) {
  const bool gpu = rt.dev->is_gpu();
  const std::string resolved = resolve_allscan(name, gpu, rt.topo);
  if (is_rail_allscan(resolved)) {
    // Inside each node the device kernel where the ranks are GPUs, else the chain (which it stands for).
    std::unique_ptr<AllScan> node_scan;
    if (gpu)
      node_scan = device_or_none(rt, name, kDefaultDeviceAllScan, max_elems, ctas, rt.topo.ranks_per_node, notice);
    return make_rail_all_scan(rt, resolved, max_rows, max_elems, std::move(node_scan));
  }
  if (is_device_allscan(resolved))
    if (auto scan = device_or_none(rt, name, resolved, max_elems, ctas, 0, notice)) return scan;
  return std::make_unique<HostAllScan>(rt, is_device_allscan(resolved) ? "host" : resolved, max_rows, max_elems);
}

}  // namespace spb
