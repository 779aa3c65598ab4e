// Turning an error that only some ranks see (a file one node cannot read) into the same UsageError on every rank,
// so all of them stop together with one message instead of some waiting for the others in a collective.
#pragma once

#include <functional>
#include <string>

#include "runtime/bootstrap.h"
#include "runtime/error.h"

namespace spb {

inline void agree_on_usage_errors(const Bootstrap& boot, const std::function<void()>& fn) {
  std::string msg;
  try {
    fn();
  } catch (const UsageError& e) {
    msg = e.what();
  }
  const int first = int(boot.min(msg.empty() ? boot.size() : boot.rank()));
  if (first == boot.size()) return;
  long long len = (long long)msg.size();
  boot.broadcast(&len, sizeof len, first);
  msg.resize(size_t(len));
  boot.broadcast(&msg[0], size_t(len), first);
  throw UsageError(msg);
}

}  // namespace spb
