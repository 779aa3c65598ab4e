#include "zeco/all_scan.h"

#include <algorithm>
#include <string>

#include "runtime/error.h"

namespace spb {

void validate_blocks(size_t rows, int blocks) {
  SPB_USAGE(blocks >= 1 && rows % size_t(blocks) == 0,
            "--blocks: K=" + std::to_string(blocks) + " must be >= 1 and divide the state's rows B*H*dk=" +
                std::to_string(rows) + " (blocks are whole rows of dv elements)");
}

const char* const kDefaultDeviceAllScan = "device-ll16";

const std::vector<std::string>& allscan_names() {
  static const std::vector<std::string> v = {"host",      "host-hier", "host-logdepth", "device", "device-flag",
                                             "device-ll", "device-ll16", "auto"};
  return v;
}

std::string resolve_allscan(const std::string& name, bool gpu, const Topology& topo) {
  const bool several_nodes = topo.nodes > 1 && topo.regular();
  const std::string r = name == "auto" ? (several_nodes ? "host-hier" : gpu ? kDefaultDeviceAllScan : "host")
                        : name == "device" ? kDefaultDeviceAllScan
                                           : name;
  // "device" and "auto" resolved above, so what is left must be one of the concrete names.
  SPB_USAGE(r != "auto" && r != "device" && std::count(allscan_names().begin(), allscan_names().end(), r),
            "--allscan: '" + name + "' does not exist; choose one of host, host-hier, host-logdepth, device, "
            "device-flag, device-ll, device-ll16, auto");
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
  return resolved == "host-hier" || resolved == "host-logdepth";
}

void all_scan_host(Runtime& rt, const AllScanArgs& a, Stream st) {
  validate_blocks(a.rows, a.blocks);
  const int p = rt.comm->rank(), P = rt.comm->size();
  const bool fwd = a.direction == ScanDirection::forward;
  const int prev = fwd ? p - 1 : p + 1;  // where the carry comes from
  const int next = fwd ? p + 1 : p - 1;  // where it goes
  const bool has_prev = prev >= 0 && prev < P, has_next = next >= 0 && next < P;
  const size_t block_rows = a.rows / a.blocks, block_elems = block_rows * a.cols, block_bytes = block_elems * 4;

  if (!has_prev) {
    if (a.first) rt.dev->copy(a.carry_in, a.first, a.rows * a.cols * 4, st);
    else rt.dev->fill_zero(a.carry_in, a.rows * a.cols * 4, st);
  }
  for (int b = 0; b < a.blocks; ++b) {
    const size_t off = size_t(b) * block_elems;
    if (has_prev) rt.comm->recv(a.carry_in + off, block_bytes, prev, st);
    rt.kern->state_fold(block_rows, a.cols, a.decay + size_t(b) * block_rows, a.carry_in + off, a.local + off,
                        a.carry_out + off, st);
    if (has_next) rt.comm->send(a.carry_out + off, block_bytes, next, st);
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
  exc_b_ = Buffer(dev, max_elems * 4);
}

void HostAllScan::run(const AllScanArgs& a, Stream st) {
  validate_blocks(a.rows, a.blocks);
  SPB_CHECK(a.rows <= max_rows_ && a.rows * a.cols <= max_elems_,
            "All-Scan of " + std::to_string(a.rows) + " x " + std::to_string(a.cols) + " past its capacity");
  if (variant_ == "host" || rt_.topo.nodes == 1) return all_scan_host(rt_, a, st);
  run_across_nodes(a, st);
}

void HostAllScan::run_across_nodes(const AllScanArgs& a, Stream st) {
  Communicator& comm = *rt_.comm;
  GlaKernels& kern = *rt_.kern;
  Device& dev = *rt_.dev;
  const int P = comm.size(), R = rt_.topo.ranks_per_node, N = rt_.topo.nodes;
  SPB_CHECK(R >= 1 && R * N == P, "the topology (" + rt_.topo.describe() + ") is not this world of " + std::to_string(P));
  const bool fwd = a.direction == ScanDirection::forward;
  // Scan order: v is this rank's place in it, and the rank at place u is rank_at(u); reversed, node n of the scan is
  // node N - 1 - n of the world (R divides P), with its ranks in the opposite order.
  auto rank_at = [&](int u) { return fwd ? u : P - 1 - u; };
  const int v = fwd ? comm.rank() : P - 1 - comm.rank();
  const int n = v / R, i = v % R;
  const bool leader = i == R - 1;  // holds the node's aggregate after step 1
  const size_t rows = a.rows, cols = a.cols, elems = rows * cols;
  const size_t block_rows = rows / size_t(a.blocks), block_elems = block_rows * cols;
  float *a_loc = a_loc_.f32(), *a_node = a_node_.f32(), *x = x_.f32();

  // 1. The node's chain from a zero state: A_loc first (small), then B_loc into carry_in, block by block; carry_out
  //    holds B_loc after this rank, on the leader the node's aggregate b. With host-hier the leader scans the nodes
  //    block by block too, as each block of its node's aggregate is in: x = X_n, carry_out = the X_n+1 it sends on.
  if (i == 0) dev.fill_zero(a_loc, rows * 4, st);
  else comm.recv(a_loc, rows * 4, rank_at(v - 1), st);
  kern.vec_add(rows, a_loc, a.decay, a_node, st);
  if (!leader) comm.send(a_node, rows * 4, rank_at(v + 1), st);
  if (i == 0) dev.fill_zero(a.carry_in, elems * 4, st);
  const bool chain_across = leader && variant_ == "host-hier";
  for (int k = 0; k < a.blocks; ++k) {
    const size_t off = size_t(k) * block_elems, roff = size_t(k) * block_rows;
    if (i > 0) comm.recv(a.carry_in + off, block_elems * 4, rank_at(v - 1), st);
    kern.state_fold(block_rows, cols, a.decay + roff, a.carry_in + off, a.local + off, a.carry_out + off, st);
    if (!leader) comm.send(a.carry_out + off, block_elems * 4, rank_at(v + 1), st);
    if (!chain_across) continue;
    if (n > 0) comm.recv(x + off, block_elems * 4, rank_at(v - R), st);
    else if (a.first) dev.copy(x + off, a.first + off, block_elems * 4, st);
    else dev.fill_zero(x + off, block_elems * 4, st);
    if (n == N - 1) continue;  // the last node's leader hands nothing on
    kern.state_fold(block_rows, cols, a_node + roff, x + off, a.carry_out + off, a.carry_out + off, st);
    comm.send(a.carry_out + off, block_elems * 4, rank_at(v + R), st);
  }

  // 2. host-logdepth: recursive doubling between the leaders. (inc_a, inc_b) = (a_node, carry_out) is the
  //    composition of nodes [n - 2d + 1, n] after the step at distance d, (exc_a, exc_b) that of [n - 2d + 1, n - 1]
  //    (none yet while `exc_empty`); what arrives covers [n - 2d + 1, n - d] and goes before both.
  if (leader && variant_ == "host-logdepth") {
    float *got_a = got_a_.f32(), *got_b = got_b_.f32(), *exc_a = exc_a_.f32(), *exc_b = exc_b_.f32();
    bool exc_empty = true;
    for (int d = 1; d < N; d *= 2) {
      const bool to = n + d < N, from = n - d >= 0;
      comm.group_start();
      if (to) {
        comm.send(a.carry_out, elems * 4, rank_at(v + d * R), st);
        comm.send(a_node, rows * 4, rank_at(v + d * R), st);
      }
      if (from) {
        comm.recv(got_b, elems * 4, rank_at(v - d * R), st);
        comm.recv(got_a, rows * 4, rank_at(v - d * R), st);
      }
      comm.group_end();
      if (!from) continue;
      if (exc_empty) {
        dev.copy(exc_b, got_b, elems * 4, st);
        dev.copy(exc_a, got_a, rows * 4, st);
        exc_empty = false;
      } else {
        kern.state_fold(rows, cols, exc_a, got_b, exc_b, exc_b, st);
        kern.vec_add(rows, exc_a, got_a, exc_a, st);
      }
      if (n + 2 * d < N) {  // the inclusive aggregate matters only while a later step sends it
        kern.state_fold(rows, cols, a_node, got_b, a.carry_out, a.carry_out, st);
        kern.vec_add(rows, a_node, got_a, a_node, st);
      }
    }
    // X_n = the exclusive aggregate applied to the scan's start.
    if (exc_empty) {
      if (a.first) dev.copy(x, a.first, elems * 4, st);
      else dev.fill_zero(x, elems * 4, st);
    } else if (a.first) {
      kern.state_fold(rows, cols, exc_a, a.first, exc_b, x, st);
    } else {
      dev.copy(x, exc_b, elems * 4, st);
    }
  }

  // 3. The leader hands X_n to its node, and every rank applies it to what its node's chain gave it.
  if (leader && R > 1) {
    comm.group_start();
    for (int j = 0; j < R - 1; ++j) comm.send(x, elems * 4, rank_at(n * R + j), st);
    comm.group_end();
  } else if (!leader) {
    comm.recv(x, elems * 4, rank_at(n * R + R - 1), st);
  }
  kern.state_fold(rows, cols, a_loc, x, a.carry_in, a.carry_in, st);
  kern.state_fold(rows, cols, a.decay, a.carry_in, a.local, a.carry_out, st);
}

}  // namespace spb
