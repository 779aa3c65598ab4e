#include "harness/method.h"

#include <algorithm>
#include <map>

#include "harness/error.h"

namespace spb {
namespace {
std::map<std::string, MethodInfo>& registry() {
  static std::map<std::string, MethodInfo> r;
  return r;
}
}  // namespace

bool register_method(MethodInfo info) {
  SPB_CHECK(!registry().count(info.name), "method registered twice: " + info.name);
  registry()[info.name] = std::move(info);
  return true;
}

const MethodInfo* find_method(const std::string& name) {
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : &it->second;
}

std::vector<std::string> method_names() {
  std::vector<std::string> names;
  for (auto& [n, _] : registry()) names.push_back(n);
  return names;
}

}  // namespace spb
