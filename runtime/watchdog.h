// The progress watchdog (DESIGN §11): a hung rank ends the job.
//
// One thread per process follows every blocking wait of the run: every MPI call that can wait for a peer (the
// bootstrap's agreements and reductions, the MPI communicator's sends, receives and collectives, MPI_Finalize), each
// a WaitScope through MPI's profiling interface (runtime/watchdog_mpi.cpp, so no call site can be missed), and waits
// that other parts poll for it through a probe. A wait that has made no progress for SPB_TIMEOUT_S seconds prints
// one line,
//
//   spbench: error: rank R waited T s in OPERATION (CONTEXT); no progress for SPB_TIMEOUT_S=X s: ...
//
// runs the abort hooks, and ends the process with status 2; the launcher
// (mpirun, or srun --kill-on-bad-exit) then ends every other rank, the stopped one included. Ending the process is
// the only dependable way out: the main thread may be blocked inside any MPI, NCCL or CUDA call at that moment.
//
// Only waits count: a rank computing for longer than the timeout is not waiting, and trips nothing. A rank that waits
// for a peer which computes for longer than the timeout does trip it, so SPB_TIMEOUT_S must exceed the longest gap
// between two ranks reaching the same collective (the default, 120 s, is far above every sweep's).
//
//   SPB_TIMEOUT_S: seconds, default 120; 0 turns the watchdog off (waits are then unbounded).
#pragma once

#include <functional>
#include <string>

namespace spb {

// SPB_TIMEOUT_S (UsageError on a value that is not a number of seconds >= 0).
double watchdog_timeout_s();

// Starts the thread once per process (the bootstrap does it); later calls only update the rank it prints.
void watchdog_start(int rank);

// Whether the thread runs (started, and SPB_TIMEOUT_S > 0): parts that would keep records only for it skip them.
bool watchdog_running();

// What the run is doing, printed in parentheses after the operation: "operator, zeco, 4096 tokens".
void watchdog_set_context(const std::string& what);
std::string watchdog_context();

// The calling thread waits in `operation` until the scope ends; where `peer` >= 0 the line names it after the
// operation ("MPI_Recv from" and 3: "MPI_Recv from rank 3"). `operation` must outlive the scope (a literal): a scope
// allocates nothing, so it costs a lock and a clock read. Nested scopes count as the outermost one.
class WaitScope {
 public:
  explicit WaitScope(const char* operation, int peer = -1);
  ~WaitScope();
  WaitScope(const WaitScope&) = delete;
  WaitScope& operator=(const WaitScope&) = delete;
};

// A wait that the watchdog cannot see through a WaitScope (work enqueued on a GPU stream): polled every period, it
// returns true and fills `operation` and `waited_s` when one of its waits has made no progress for `timeout_s`. It
// runs on the watchdog's thread, never after watchdog_remove_probe has returned.
using WaitProbe = std::function<bool(double timeout_s, std::string& operation, double& waited_s)>;
int watchdog_add_probe(WaitProbe probe);
void watchdog_remove_probe(int id);

// Run before the process ends on a hang (the NCCL communicator aborts itself so its kernels return).
int watchdog_add_abort_hook(std::function<void()> hook);
void watchdog_remove_abort_hook(int id);

// Prints the watchdog's line and ends the process (status 2): for a part that finds a hang itself.
[[noreturn]] void watchdog_report_hang(const std::string& operation, double waited_s);

}  // namespace spb
