#include "sp/runtime.h"

#include <cstdlib>

#include "runtime/collective_errors.h"
#include "runtime/error.h"
#include "runtime/provenance.h"

#ifdef SPB_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/gdn/cuda/gdn_cuda.h"
#include "kernels/gla/cuda/gla_cuda.h"
#endif

namespace spb {

std::string resolve_backend(const std::string& b) {
  if (b != "auto") return b;
#ifdef SPB_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) return "gpu";
#endif
  return "cpu";
}

std::string Topology::describe() const {
  if (!regular()) return std::to_string(nodes) + " nodes of unequal or interleaved ranks";
  return std::to_string(nodes) + (nodes == 1 ? " node x " : " nodes x ") + std::to_string(ranks_per_node) +
         (ranks_per_node == 1 ? " rank" : " ranks") + (simulated ? ", simulated" : "") +
         (over_network ? ", NCCL between them over its network" : "");
}

Topology topology_of(const std::vector<int>& host, int ranks_per_node, const std::string& flag) {
  const int P = int(host.size());
  // The launch: regular where every node holds the same number of consecutive ranks.
  Topology launch;
  launch.nodes = 0;
  for (int r = 0; r < P; ++r) launch.nodes += host[size_t(r)] == r;
  const int per = P / launch.nodes;
  launch.ranks_per_node = P % launch.nodes == 0 ? per : 0;
  for (int r = 0; r < P && launch.regular(); ++r)
    if (host[size_t(r)] != r / per * per) launch.ranks_per_node = 0;
  if (ranks_per_node == 0) return launch;

  const int n = ranks_per_node;
  const std::string what = flag + (flag[0] == '-' ? " " : "=") + std::to_string(n) + ": ";
  SPB_USAGE(n >= 1, what + "must be >= 1");
  SPB_USAGE(P % n == 0, what + "does not divide the world size " + std::to_string(P) +
                            " (a node holds ranks_per_node consecutive ranks)");
  // A simulated node stands for ranks that share a node, so it must not span two hosts.
  for (int r = 0; r < P; ++r) {
    const int first = r / n * n;
    SPB_USAGE(host[size_t(r)] == host[size_t(first)],
              what + "ranks " + std::to_string(first) + " and " + std::to_string(r) +
                  " would share a node but run on different hosts (this launch has " + launch.describe() +
                  "); a simulated node must lie inside one real node");
  }
  Topology t;
  t.ranks_per_node = n;
  t.nodes = P / n;
  t.simulated = true;
  return t;
}

Topology resolve_topology(const Bootstrap& boot, int ranks_per_node) {
  const char* env = std::getenv("SPB_RANKS_PER_NODE");
  Topology t;
  agree_on_usage_errors(boot, [&] {
    if (ranks_per_node != 0 || !env || !*env) {
      t = topology_of(boot.node_first_rank(), ranks_per_node, "--ranks-per-node");
      return;
    }
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    SPB_USAGE(*end == '\0' && v >= 1 && v <= 1000000,
              std::string("SPB_RANKS_PER_NODE=") + env + ": not a whole number >= 1");
    t = topology_of(boot.node_first_rank(), int(v), "SPB_RANKS_PER_NODE");
  });
  return t;
}

std::unique_ptr<Runtime> make_runtime(Bootstrap& boot, const std::string& backend, int ranks_per_node,
                                      bool nodes_over_network) {
  Topology topo = resolve_topology(boot, ranks_per_node);
  if (nodes_over_network) {
    agree_on_usage_errors(boot, [&] {
      SPB_USAGE(topo.simulated && topo.nodes > 1,
                "--nodes-over-network: needs nodes simulated on one host (--ranks-per-node N with N < the world "
                "size " + std::to_string(boot.size()) + "); this launch has " + topo.describe());
      SPB_USAGE(backend == "gpu", "--nodes-over-network: only --backend gpu has a network to choose (NCCL's); the " +
                                      backend + " backend's ranks talk over MPI");
    });
    topo.over_network = true;
  }
  auto rt = std::unique_ptr<Runtime>(new Runtime{boot, backend, nullptr, nullptr, nullptr, nullptr, topo});
  if (backend == "cpu") {
    rt->dev = make_cpu_device();
    rt->kern = make_cpu_kernels();
    rt->gdn = make_cpu_gdn_kernels();
    rt->comm = make_mpi_communicator(boot);
    return rt;
  }
  SPB_USAGE(backend == "gpu", "--backend: '" + backend + "' does not exist; use cpu or gpu");
#ifdef SPB_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  // Agree first, so that every rank stops with the same message instead of some waiting in NCCL's init.
  SPB_USAGE(boot.all(count > 0), "--backend gpu: no CUDA GPU found on at least one node (rank " +
                                     std::to_string(boot.rank()) + " sees " + std::to_string(count) + ")");
  SPB_USAGE(boot.all(boot.local_size() <= count),
            "--backend gpu: " + std::to_string(boot.local_size()) + " ranks on a node with " + std::to_string(count) +
                " GPUs; start at most one rank per GPU");
  rt->dev = make_cuda_device(boot.local_rank());
  rt->kern = make_cuda_kernels();
  rt->gdn = make_cuda_gdn_kernels();
  // Each simulated node its own host to NCCL: this host's name and the node's index.
  const std::string host_id = topo.over_network ? host_name() + ".spb-node" +
                                                      std::to_string(boot.rank() / topo.ranks_per_node)
                                                : std::string();
  rt->comm = make_nccl_communicator(boot, *rt->dev, host_id);
  return rt;
#else
  throw UsageError("--backend gpu: this spbench was built without CUDA (no nvcc or NCCL at configure time)");
#endif
}

}  // namespace spb
