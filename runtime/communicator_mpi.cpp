// The MPI communicator: host buffers, blocking calls, groups as Isend/Irecv + Waitall.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "runtime/bootstrap.h"
#include "runtime/communicator.h"
#include "runtime/error.h"

namespace spb {
namespace {

#define SPB_MPI_CALL(call) SPB_CHECK((call) == MPI_SUCCESS, "MPI call failed")

int count_of(size_t bytes) {
  SPB_CHECK(bytes <= size_t(INT_MAX), "an MPI message of more than 2 GiB");
  return int(bytes);
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(Bootstrap& boot) {
    SPB_MPI_CALL(MPI_Comm_dup(reinterpret_cast<MPI_Comm>(boot.world()), &comm_));
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override { MPI_Comm_free(&comm_); }

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void send(const void* buf, size_t bytes, int peer, Stream) override {
    if (in_group_) {
      pending_.emplace_back();
      SPB_MPI_CALL(MPI_Isend(buf, count_of(bytes), MPI_BYTE, peer, kTag, comm_, &pending_.back()));
    } else {
      SPB_MPI_CALL(MPI_Send(buf, count_of(bytes), MPI_BYTE, peer, kTag, comm_));
    }
  }
  void recv(void* buf, size_t bytes, int peer, Stream) override {
    if (in_group_) {
      pending_.emplace_back();
      SPB_MPI_CALL(MPI_Irecv(buf, count_of(bytes), MPI_BYTE, peer, kTag, comm_, &pending_.back()));
    } else {
      SPB_MPI_CALL(MPI_Recv(buf, count_of(bytes), MPI_BYTE, peer, kTag, comm_, MPI_STATUS_IGNORE));
    }
  }
  void group_start() override {
    SPB_CHECK(!in_group_, "nested group_start");
    in_group_ = true;
  }
  void group_end() override {
    SPB_CHECK(in_group_, "group_end without group_start");
    in_group_ = false;
    SPB_MPI_CALL(MPI_Waitall(int(pending_.size()), pending_.data(), MPI_STATUSES_IGNORE));
    pending_.clear();
  }
  void all_gather(const void* send, void* recv, size_t bytes, Stream) override {
    const bool in_place = send == static_cast<const char*>(recv) + size_t(rank_) * bytes;  // MPI forbids aliasing
    SPB_MPI_CALL(MPI_Allgather(in_place ? MPI_IN_PLACE : send, count_of(bytes), MPI_BYTE, recv, count_of(bytes),
                               MPI_BYTE, comm_));
  }
  void all_to_all(const void* send, void* recv, size_t bytes, Stream) override {
    SPB_MPI_CALL(MPI_Alltoall(send, count_of(bytes), MPI_BYTE, recv, count_of(bytes), MPI_BYTE, comm_));
  }
  void barrier(Stream) override { SPB_MPI_CALL(MPI_Barrier(comm_)); }
  void all_reduce_sum(float* buf, size_t n, Stream) override {
    for (size_t done = 0; done < n;) {  // MPI counts are ints
      const size_t part = std::min<size_t>(n - done, size_t(INT_MAX));
      SPB_MPI_CALL(MPI_Allreduce(MPI_IN_PLACE, buf + done, int(part), MPI_FLOAT, MPI_SUM, comm_));
      done += part;
    }
  }
  void reduce_scatter_sum(float* buf, size_t n, Stream) override {
    // MPI's in-place form leaves the sum at the start of buf, over block 0; this interface's place is block rank,
    // and the other blocks stay as they were (as NCCL's in-place form leaves them).
    std::vector<float> sum(n);
    SPB_MPI_CALL(MPI_Reduce_scatter_block(buf, sum.data(), count_of(n), MPI_FLOAT, MPI_SUM, comm_));
    std::copy(sum.begin(), sum.end(), buf + size_t(rank_) * n);
  }

 private:
  static constexpr int kTag = 7;
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  bool in_group_ = false;
  std::vector<MPI_Request> pending_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(Bootstrap& boot) { return std::make_unique<MpiCommunicator>(boot); }

}  // namespace spb
