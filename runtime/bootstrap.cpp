#include "runtime/bootstrap.h"

#include <mpi.h>
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include <algorithm>
#include <string>

#include "runtime/error.h"

#define SPB_MPI(call)                                                                \
  do {                                                                               \
    int rc_ = (call);                                                                \
    if (rc_ != MPI_SUCCESS) ::spb::fail(__FILE__, __LINE__, std::string(#call) + " failed with MPI error " + std::to_string(rc_)); \
  } while (0)

namespace spb {

Bootstrap::Bootstrap(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) SPB_MPI(MPI_Init(argc, argv));
  SPB_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  SPB_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  error_rank() = rank_;
  // Ranks on the same node: the local rank picks the GPU.
  MPI_Comm local;
  SPB_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
  SPB_MPI(MPI_Comm_rank(local, &local_rank_));
  SPB_MPI(MPI_Comm_size(local, &local_size_));
  local_comm_ = new MPI_Comm(local);
  int first = rank_;
  SPB_MPI(MPI_Allreduce(&rank_, &first, 1, MPI_INT, MPI_MIN, local));
  node_first_rank_.resize(size_t(size_));
  SPB_MPI(MPI_Allgather(&first, 1, MPI_INT, node_first_rank_.data(), 1, MPI_INT, MPI_COMM_WORLD));
  // Host threads (input generation, checks): this rank's share of the node's cores, unless OMP_NUM_THREADS says.
  if (!std::getenv("OMP_NUM_THREADS")) {
    const int cores = int(std::thread::hardware_concurrency());
    omp_set_num_threads(std::max(1, cores / std::max(1, local_size_)));
  }
}

Bootstrap::~Bootstrap() {
  auto* local = static_cast<MPI_Comm*>(local_comm_);
  MPI_Comm_free(local);
  delete local;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void* Bootstrap::world() const { return reinterpret_cast<void*>(MPI_COMM_WORLD); }

namespace {
double allreduce(double x, MPI_Op op) {
  double y = 0;
  SPB_MPI(MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, op, MPI_COMM_WORLD));
  return y;
}
}  // namespace

double Bootstrap::max(double x) const { return allreduce(x, MPI_MAX); }
double Bootstrap::min(double x) const { return allreduce(x, MPI_MIN); }
double Bootstrap::sum(double x) const { return allreduce(x, MPI_SUM); }
bool Bootstrap::all(bool ok) const { return allreduce(ok ? 1.0 : 0.0, MPI_MIN) > 0.5; }

std::vector<char> Bootstrap::gather(const void* data, size_t bytes) const {
  std::vector<char> out(rank_ == 0 ? bytes * size_ : 0);
  SPB_CHECK(bytes < (size_t(1) << 31), "gather of more than 2 GiB per rank");
  SPB_MPI(MPI_Gather(data, int(bytes), MPI_BYTE, out.data(), int(bytes), MPI_BYTE, 0, MPI_COMM_WORLD));
  return out;
}

void Bootstrap::broadcast(void* data, size_t bytes, int root) const {
  SPB_MPI(MPI_Bcast(data, int(bytes), MPI_BYTE, root, MPI_COMM_WORLD));
}

void Bootstrap::barrier() const { SPB_MPI(MPI_Barrier(MPI_COMM_WORLD)); }

void Bootstrap::abort(int code) const {
#if SPB_SIM
  // Every simulated rank lives in this one process: ending it ends the job, with the code (SMPI's MPI_Abort kills
  // the ranks but lets smpirun exit 0).
  std::fflush(nullptr);
  std::_Exit(code);
#else
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
#endif
}

}  // namespace spb
