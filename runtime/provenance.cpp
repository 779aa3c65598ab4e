#include "runtime/provenance.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <string>

#include "runtime/device.h"
#include "spb_git_sha.h"  // generated at every build (scripts/git_sha.cmake)

#ifdef SPB_HAVE_CUDA
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace spb {

namespace {
std::string version3(int v) {  // CUDA's 12080 -> "12.8"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}
}  // namespace

std::string git_sha() {
  const char* sha = std::getenv("SPB_GIT_SHA");  // a run from a copied tree can say which commit it is
  return sha && *sha ? std::string(sha) : std::string(SPB_GIT_SHA);
}

std::string host_name() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host;
}

void add_provenance(ResultRow& row, const Device& dev) {
  row.set("git_sha", git_sha());
  row.set("gpu", dev.name());
  row.set("host", host_name());
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  row.set("date", std::string(date));
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(mpi, &len);
  std::string m(mpi, len);
  row.set("mpi", m.substr(0, m.find('\n')).substr(0, 40));
#ifdef SPB_HAVE_CUDA
  if (dev.is_gpu()) {
    int v = 0;
    cudaDriverGetVersion(&v);
    row.set("driver", "cuda-" + version3(v));
    cudaRuntimeGetVersion(&v);
    row.set("cuda", version3(v));
    ncclGetVersion(&v);
    row.set("nccl", std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100));
  }
#endif
}

}  // namespace spb
