#include "harness/method.h"

#include "harness/registry.h"

namespace spb {

bool register_method(MethodInfo info) { return Registry<MethodInfo>::add(std::move(info)); }
const MethodInfo* find_method(const std::string& name) { return Registry<MethodInfo>::find(name); }
const MethodInfo& require_method(const std::string& name) { return Registry<MethodInfo>::require(name, "--method"); }
std::vector<std::string> method_names() { return Registry<MethodInfo>::names(); }

}  // namespace spb
