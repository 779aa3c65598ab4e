// The data plane between ranks: what the SP methods send, over MPI on CPU ranks and over NCCL on GPUs.
//
// Semantics follow NCCL so one method body serves both: every operation is ordered on `stream` (on the CPU it has
// completed when the call returns). Point-to-point operations posted between group_start() and group_end() progress
// together and have all completed (on the stream) after group_end(); that is the non-blocking form, and the only
// safe way to send and receive at once (a ring step). Outside a group, send and recv are blocking. Collectives may
// stand in a group too (NCCL launches them together; MPI runs each as it is called): the model's many small
// all-reduces of one step.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device.h"

namespace spb {

class Bootstrap;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;  // "mpi", "nccl"
  virtual int rank() const = 0;
  virtual int size() const = 0;

  virtual void send(const void* buf, size_t bytes, int peer, Stream s) = 0;
  virtual void recv(void* buf, size_t bytes, int peer, Stream s) = 0;
  virtual void group_start() = 0;
  virtual void group_end() = 0;
  // recv = the `bytes` of every rank, in rank order. In place where send is recv + rank x bytes.
  virtual void all_gather(const void* send, void* recv, size_t bytes, Stream s) = 0;
  // Block j of `send` goes to rank j; block i of `recv` comes from rank i; each block is `bytes`.
  virtual void all_to_all(const void* send, void* recv, size_t bytes, Stream s) = 0;
  virtual void barrier(Stream s) = 0;
  // buf = the element-wise sum of every rank's buf, n fp32 elements in place (the model's weight gradients).
  virtual void all_reduce_sum(float* buf, size_t n, Stream s) = 0;
  // buf holds size() blocks of n fp32 elements; afterwards block rank() holds the element-wise sum of every rank's
  // block rank(), and the other blocks are as they were: the reduce-scatter of a sharded optimizer, in place.
  virtual void reduce_scatter_sum(float* buf, size_t n, Stream s) = 0;
  // The library's own handle (ncclComm_t for NCCL), for code that needs more than this interface (device All-Scan).
  virtual void* native_handle() const { return nullptr; }
};

// The MPI communicator over host memory (a duplicate of the bootstrap's world communicator).
std::unique_ptr<Communicator> make_mpi_communicator(Bootstrap& boot);

#ifdef SPB_HAVE_CUDA
// The NCCL communicator over device buffers (runtime/communicator_nccl.cpp): rank 0 makes the unique id, the
// bootstrap broadcasts it; `dev` is this rank's GPU. `host_id` (where not empty) is this rank's NCCL_HOSTID: ranks of
// different ids are on different hosts to NCCL, which then carries their traffic over its network transport
// (NCCL_NET, Socket unless set) instead of NVLink or shared memory; the communicator's name says which
// ("nccl-socket"). Set before NCCL's first call in the process: NCCL reads the host id once.
std::unique_ptr<Communicator> make_nccl_communicator(Bootstrap& boot, Device& dev, const std::string& host_id = "");
#endif

}  // namespace spb
