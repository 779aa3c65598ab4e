// The process group: MPI_Init, ranks, and the small host-side agreements every level needs (did every rank read its
// input, the max time over ranks, gathering a result to rank 0). Always MPI, whatever carries the data.
#pragma once

#include <string>
#include <vector>

namespace spb {

class Bootstrap {
 public:
  Bootstrap(int* argc, char*** argv);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  // For every world rank, the lowest world rank on its node (the ranks that share memory: MPI_COMM_TYPE_SHARED).
  const std::vector<int>& node_first_rank() const { return node_first_rank_; }
  void* world() const;  // the MPI_Comm, as an opaque pointer for the communicators

  double max(double x) const;
  double min(double x) const;
  double sum(double x) const;
  bool all(bool ok) const;
  // rank 0 receives every rank's `bytes` (in rank order); other ranks receive nothing.
  std::vector<char> gather(const void* data, size_t bytes) const;
  void broadcast(void* data, size_t bytes, int root) const;
  void barrier() const;
  // Stops every rank at once: for errors after which a peer may be stuck inside a collective.
  [[noreturn]] void abort(int code) const;

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::vector<int> node_first_rank_;
  void* local_comm_ = nullptr;
};

}  // namespace spb
