// Every MPI call that can wait for a peer, under the progress watchdog (runtime/watchdog.h), through MPI's profiling
// interface: the call is defined here as a WaitScope around its PMPI_ twin, the way MPI tools (mpiP, Score-P)
// intercept a program's calls. So the bootstrap, the MPI communicator and anything added later are covered at once,
// and no call site can be missed. These are the calls spbench makes; a new blocking call gets its wrapper here (the
// fault tests stop a rank at every level, so a missing one shows as a hang there).
#include <mpi.h>

#include "runtime/watchdog.h"

using spb::WaitScope;

extern "C" {

int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  WaitScope wait("MPI_Send to", dest);
  return PMPI_Send(buf, count, type, dest, tag, comm);
}

int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status* status) {
  WaitScope wait("MPI_Recv from", source);
  return PMPI_Recv(buf, count, type, source, tag, comm, status);
}

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  WaitScope wait("MPI_Wait");
  return PMPI_Wait(request, status);
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status* statuses) {
  WaitScope wait("MPI_Waitall (sends and receives of a group)");
  return PMPI_Waitall(count, requests, statuses);
}

int MPI_Barrier(MPI_Comm comm) {
  WaitScope wait("MPI_Barrier");
  return PMPI_Barrier(comm);
}

int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  WaitScope wait("MPI_Bcast from", root);
  return PMPI_Bcast(buf, count, type, root, comm);
}

int MPI_Gather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
               MPI_Datatype recv_type, int root, MPI_Comm comm) {
  WaitScope wait("MPI_Gather to", root);
  return PMPI_Gather(send, send_count, send_type, recv, recv_count, recv_type, root, comm);
}

int MPI_Allgather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                  MPI_Datatype recv_type, MPI_Comm comm) {
  WaitScope wait("MPI_Allgather");
  return PMPI_Allgather(send, send_count, send_type, recv, recv_count, recv_type, comm);
}

int MPI_Alltoall(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                 MPI_Datatype recv_type, MPI_Comm comm) {
  WaitScope wait("MPI_Alltoall");
  return PMPI_Alltoall(send, send_count, send_type, recv, recv_count, recv_type, comm);
}

int MPI_Allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  WaitScope wait("MPI_Allreduce");
  return PMPI_Allreduce(send, recv, count, type, op, comm);
}

int MPI_Reduce_scatter_block(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  WaitScope wait("MPI_Reduce_scatter_block");
  return PMPI_Reduce_scatter_block(send, recv, count, type, op, comm);
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* out) {
  WaitScope wait("MPI_Comm_dup");
  return PMPI_Comm_dup(comm, out);
}

int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm* out) {
  WaitScope wait("MPI_Comm_split_type");
  return PMPI_Comm_split_type(comm, type, key, info, out);
}

int MPI_Finalize() {
  WaitScope wait("MPI_Finalize");
  return PMPI_Finalize();
}

}  // extern "C"
