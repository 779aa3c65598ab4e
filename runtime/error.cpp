#include "runtime/error.h"

namespace spb {

int& error_rank() {
  static int rank = -1;
  return rank;
}

void fail(const char* file, int line, const std::string& what) {
  throw Error(std::string(file) + ":" + std::to_string(line) + " (rank " + std::to_string(error_rank()) + "): " + what);
}

}  // namespace spb
