// Errors. Two kinds, handled differently by the entry point:
//  - UsageError: bad input a user can fix (a flag, a shape, a file). Every rank detects it the same way or agrees on
//    it through the bootstrap, so all ranks print one line and exit 2 together: no rank waits forever.
//  - RankUsageError: bad input a user can fix that a rank finds in its own work only (a stage time one rank's share
//    needs, a message one rank sends): the other ranks may be waiting for it in a collective, so the entry point
//    prints it with the rank and aborts the whole job (exit 2). Under SMPI the first such rank ends the simulation;
//    on real ranks that all raise it at once, each prints its line before the abort reaches it.
//  - Error: a broken invariant or a failed library call. SPB_CHECK names the file, line and rank; the entry point then
//    aborts the whole job, since the other ranks may be stuck inside a collective.
#pragma once

#include <stdexcept>
#include <string>

namespace spb {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RankUsageError : UsageError {
  using UsageError::UsageError;
};

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The rank this process prints in error messages; set by the bootstrap (-1 before it).
int& error_rank();

[[noreturn]] void fail(const char* file, int line, const std::string& what);

}  // namespace spb

#define SPB_CHECK(cond, msg)                                               \
  do {                                                                     \
    if (!(cond)) ::spb::fail(__FILE__, __LINE__, std::string(#cond ": ") + (msg)); \
  } while (0)

#define SPB_USAGE(cond, msg)                     \
  do {                                           \
    if (!(cond)) throw ::spb::UsageError(msg);   \
  } while (0)

#define SPB_USAGE_RANK(cond, msg)                  \
  do {                                             \
    if (!(cond)) throw ::spb::RankUsageError(msg); \
  } while (0)
