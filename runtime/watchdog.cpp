#include "runtime/watchdog.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "runtime/error.h"

namespace spb {
namespace {

using Clock = std::chrono::steady_clock;

struct State {
  std::mutex mu;  // guards everything below but `reporting`
  std::condition_variable cv;
  bool started = false;
  int rank = -1;
  double timeout_s = 0;
  std::string context;
  std::map<int, std::function<void()>> hooks;
  int next_id = 1;
  int depth = 0;  // the open WaitScopes; the outermost one's operation, peer and start
  const char* operation = nullptr;
  int peer = -1;
  Clock::time_point since;
  std::atomic<bool> reporting{false};
  // The probes, under their own lock, held while they run: a probe is never removed (its owner destroyed) mid-call.
  std::mutex probe_mu;
  std::map<int, WaitProbe> probes;
};

State& state() {
  static State* s = new State;  // never destroyed: the thread may outlive static destruction at exit
  return *s;
}

[[noreturn]] void watch_loop(State& s) {
  const double timeout = s.timeout_s;
  const auto period = std::chrono::milliseconds(timeout < 2 ? 10 : timeout < 20 ? 100 : 500);
  auto last = Clock::now();
  for (;;) {
    std::this_thread::sleep_for(period);
    // A gap far longer than the period means this process itself was stopped (SIGSTOP, a debugger, a frozen VM):
    // that time is not a wait for a peer, so a rank resumed after a stop does not blame its peers for it.
    const auto now = Clock::now();
    const auto gap = now - last;
    last = now;
    const char* wait_op = nullptr;
    int peer = -1;
    double waited = 0;
    {
      std::lock_guard<std::mutex> lk(s.mu);
      if (gap > 5 * period + std::chrono::seconds(1)) s.since += gap - period;
      if (s.depth > 0)
        wait_op = s.operation, peer = s.peer, waited = std::chrono::duration<double>(Clock::now() - s.since).count();
    }
    if (wait_op && waited > timeout)
      watchdog_report_hang(peer >= 0 ? std::string(wait_op) + " rank " + std::to_string(peer) : wait_op, waited);
    std::string op;
    std::lock_guard<std::mutex> lk(s.probe_mu);
    for (auto& [id, probe] : s.probes) {
      if (probe(timeout, op, waited)) watchdog_report_hang(op, waited);
    }
  }
}

}  // namespace

double watchdog_timeout_s() {
  const char* s = std::getenv("SPB_TIMEOUT_S");
  if (!s || !*s) return 120.0;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  SPB_USAGE(end && *end == '\0' && v >= 0, std::string("SPB_TIMEOUT_S='") + s + "' is not a number of seconds >= 0");
  return v;
}

void watchdog_start(int rank) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  s.rank = rank;
  if (s.started) return;
  s.started = true;
  s.timeout_s = watchdog_timeout_s();
#ifdef SPB_SIM
  s.timeout_s = 0;  // the simulation's ranks are actors of one process, on its clock: no thread may watch them
#endif
  if (s.timeout_s > 0) std::thread([&s] { watch_loop(s); }).detach();
}

void watchdog_set_context(const std::string& what) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  s.context = what;
}

std::string watchdog_context() {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  return s.context;
}

WaitScope::WaitScope(const char* operation, int peer) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  if (s.depth++ == 0) s.operation = operation, s.peer = peer, s.since = Clock::now();
}

WaitScope::~WaitScope() {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  --s.depth;
}

bool watchdog_running() {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  return s.started && s.timeout_s > 0;
}

int watchdog_add_probe(WaitProbe probe) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.probe_mu);
  static int next_id = 1;
  s.probes.emplace(next_id, std::move(probe));
  return next_id++;
}

void watchdog_remove_probe(int id) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.probe_mu);
  s.probes.erase(id);
}

int watchdog_add_abort_hook(std::function<void()> hook) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  s.hooks.emplace(s.next_id, std::move(hook));
  return s.next_id++;
}

void watchdog_remove_abort_hook(int id) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.mu);
  s.hooks.erase(id);
}

void watchdog_report_hang(const std::string& operation, double waited_s) {
  State& s = state();
  if (s.reporting.exchange(true)) {  // another thread is already ending the process
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  std::string context;
  std::map<int, std::function<void()>> hooks;
  {
    // try_lock: the thread that holds the lock may be the one that hangs; the line matters more than the context.
    std::unique_lock<std::mutex> lk(s.mu, std::try_to_lock);
    if (lk.owns_lock()) context = s.context, hooks = s.hooks;
  }
  std::fprintf(stderr,
               "spbench: error: rank %d waited %.0f s in %s (%s); no progress for SPB_TIMEOUT_S=%g s: a peer rank is "
               "dead, stopped or hung. Ending the job.\n",
               s.rank, waited_s, operation.c_str(), context.empty() ? "setup" : context.c_str(), s.timeout_s);
  std::fflush(stderr);
  // The hooks get a few seconds; one that hangs itself (an abort stuck in a driver) does not keep the process alive.
  std::thread([hooks] {
    for (auto& [id, hook] : hooks) hook();
    std::_Exit(2);
  }).detach();
  std::this_thread::sleep_for(std::chrono::seconds(5));
  std::_Exit(2);
}

}  // namespace spb
