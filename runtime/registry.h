// A registry of named plug-ins (SP methods, collective patterns), filled at static-initialisation time: each plug-in
// file registers itself, and the harness, tests and reports find it by name.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace spb {

// Info: a struct with a `name` member.
template <class Info>
class Registry {
 public:
  static bool add(Info info) {
    SPB_CHECK(!all().count(info.name), "registered twice: " + info.name);
    std::string name = info.name;
    all().emplace(std::move(name), std::move(info));
    return true;
  }
  static const Info* find(const std::string& name) {
    auto it = all().find(name);
    return it == all().end() ? nullptr : &it->second;
  }
  // The entry called `name`, or a UsageError that names the flag and every registered name.
  static const Info& require(const std::string& name, const std::string& flag) {
    if (const Info* i = find(name)) return *i;
    std::string list;
    for (auto& n : names()) list += (list.empty() ? "" : ", ") + n;
    throw UsageError(flag + ": '" + name + "' does not exist; choose one of: " + list);
  }
  static std::vector<std::string> names() {
    std::vector<std::string> n;
    for (auto& [k, _] : all()) n.push_back(k);
    return n;
  }

 private:
  static std::map<std::string, Info>& all() {
    static std::map<std::string, Info> r;  // a function-local static: safe from static-initialisation order
    return r;
  }
};

}  // namespace spb
