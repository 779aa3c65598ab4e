#include "sp/method.h"

#include <algorithm>

#include "runtime/error.h"
#include "runtime/registry.h"

namespace spb {

const char* attention_name(Attention a) { return a == Attention::gdn ? "gdn" : "gla"; }

Attention parse_attention(const std::string& name) {
  if (name == "gla") return Attention::gla;
  if (name == "gdn") return Attention::gdn;
  throw UsageError("--attention: '" + name + "' is not a family; use gla (Gated Linear Attention, the default) or gdn "
                   "(Gated DeltaNet)");
}

bool register_method(MethodInfo info) { return Registry<MethodInfo>::add(std::move(info)); }
const MethodInfo* find_method(const std::string& name) { return Registry<MethodInfo>::find(name); }
const MethodInfo& require_method(const std::string& name) { return Registry<MethodInfo>::require(name, "--method"); }
std::vector<std::string> method_names() {
  // The paper's tables' order: dp (what every ratio divides by), zeco (the subject), then the baselines; a method
  // added by a file of its own follows them, by name. `-m all` runs them in this order, so a run cut short keeps
  // the first comparison.
  static const std::vector<std::string> kPaperOrder = {"dp", "zeco", "lasp2", "lasp1", "ring", "ulysses"};
  std::vector<std::string> names = Registry<MethodInfo>::names();
  auto rank = [](const std::string& n) {
    return size_t(std::find(kPaperOrder.begin(), kPaperOrder.end(), n) - kPaperOrder.begin());
  };
  std::stable_sort(names.begin(), names.end(),
                   [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
  return names;
}

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

std::vector<std::string> methods_to_run(const std::string& list, const SpConfig& c, int world,
                                        std::vector<std::string>* left_out) {
  std::vector<std::string> out;
  for (const std::string& m : split_method_list(list)) {
    const MethodInfo& info = require_method(m);
    const std::string why = info.limit ? info.limit(c, world) : "";
    SPB_USAGE(why.empty() || list == "all", "--method " + m + ": " + why);
    if (why.empty()) out.push_back(m);
    else if (left_out) left_out->push_back(m + ": " + why);
  }
  SPB_USAGE(!out.empty(), "--method: give a method, a comma-separated list or all" +
                              std::string(list == "all" ? " (none of them can run this configuration)" : ""));
  return out;
}

}  // namespace spb
