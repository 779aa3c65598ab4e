#include "sp/method.h"

#include <algorithm>

#include "runtime/registry.h"

namespace spb {

bool register_method(MethodInfo info) { return Registry<MethodInfo>::add(std::move(info)); }
const MethodInfo* find_method(const std::string& name) { return Registry<MethodInfo>::find(name); }
const MethodInfo& require_method(const std::string& name) { return Registry<MethodInfo>::require(name, "--method"); }
std::vector<std::string> method_names() { return Registry<MethodInfo>::names(); }

std::vector<std::string> split_method_list(const std::string& list) {
  if (list == "all") return method_names();
  std::vector<std::string> out;
  size_t a = 0;
  while (a <= list.size()) {
    const size_t b = std::min(list.find(',', a), list.size());
    if (b > a) out.push_back(list.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

}  // namespace spb
