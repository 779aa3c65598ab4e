#include "runtime/provenance.h"

#include <dlfcn.h>
#include <mpi.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
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

namespace {

std::string first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Names a container or VM gives every host alike: they do not tell two machines apart.
bool generic_host(const std::string& h) {
  return h.empty() || h == "vm" || h == "localhost" || h == "localhost.localdomain" || h == "(none)";
}

}  // namespace

std::string host_name() {
  // The first of the kernel's host name, gethostname, $HOSTNAME and Slurm's node name that is not a generic name;
  // $SPB_HOST overrides where all of them are generic (a VM that calls itself "vm" on every machine).
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  const std::string candidates[] = {first_line("/proc/sys/kernel/hostname"), buf, env("HOSTNAME"),
                                    env("SLURMD_NODENAME")};
  for (const std::string& h : candidates)
    if (!generic_host(h)) return h;
  if (const std::string o = env("SPB_HOST"); !o.empty()) return o;
  for (const std::string& h : candidates)
    if (!h.empty()) return h;
  return "";
}

std::string driver_version() {
  // The kernel module's line: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 ..."
  std::istringstream words(first_line("/proc/driver/nvidia/version"));
  std::string w, prev;
  while (words >> w) {
    if (prev == "Module" && !w.empty() && std::isdigit((unsigned char)w[0])) return w;
    prev = w;
  }
  // NVML, where the library is there (no link-time dependency: a CPU build runs without it).
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!nvml) return "";
  using InitFn = int (*)();
  using VersionFn = int (*)(char*, unsigned);
  auto init = reinterpret_cast<InitFn>(dlsym(nvml, "nvmlInit_v2"));
  auto version = reinterpret_cast<VersionFn>(dlsym(nvml, "nvmlSystemGetDriverVersion"));
  auto shutdown = reinterpret_cast<InitFn>(dlsym(nvml, "nvmlShutdown"));
  std::string out;
  char v[96] = {0};
  if (init && version && init() == 0) {
    if (version(v, sizeof v) == 0) out = v;
    if (shutdown) shutdown();
  }
  dlclose(nvml);
  return out;
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
    row.set("driver", driver_version());
    cudaRuntimeGetVersion(&v);
    row.set("cuda", version3(v));
    ncclGetVersion(&v);
    row.set("nccl", std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100));
  }
#endif
}

}  // namespace spb
