#include "harness/resume.h"

#include <cstdio>

#include "runtime/collective_errors.h"

namespace spb {

double node_available_bytes() {
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  double kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
  std::fclose(f);
  return kib * 1024;
}

void require_distinct_methods(const std::string& list) {
  std::vector<std::string> seen;
  std::string name;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] != ',') {
      name += list[i];
      continue;
    }
    for (const std::string& s : seen)
      SPB_USAGE(s != name, "--method " + list + ": " + name + " is given twice (its rows would be written twice)");
    seen.push_back(name);
    name.clear();
  }
}

void check_outputs(const Bootstrap& boot, const std::vector<OutputPath>& outputs) {
  agree_on_usage_errors(boot, [&] {
    if (boot.rank() != 0) return;
    for (const OutputPath& o : outputs) {
      if (o.dir) check_output_dir(o.flag, o.path);
      else check_output_file(o.flag, o.path);
    }
  });
}

std::vector<std::string> methods_to_measure(const Bootstrap& boot, const std::string& path,
                                            const std::vector<std::string>& extra, bool resume,
                                            const std::vector<std::string>& methods,
                                            const std::function<bool(const CsvAppender&, const std::string&)>& in_csv,
                                            const std::string& where, std::unique_ptr<CsvAppender>& csv) {
  std::vector<int> skip(methods.size(), 0);
  agree_on_usage_errors(boot, [&] {
    if (boot.rank() != 0) return;
    csv = std::make_unique<CsvAppender>(path, extra);
    for (size_t i = 0; i < methods.size(); ++i) skip[i] = resume && in_csv(*csv, methods[i]);
  });
  boot.broadcast(skip.data(), skip.size() * sizeof(int), 0);
  std::vector<std::string> todo;
  for (size_t i = 0; i < methods.size(); ++i) {
    if (!skip[i]) todo.push_back(methods[i]);
    else if (boot.rank() == 0)
      std::printf("# %s %s: already in %s, skipped\n", methods[i].c_str(), where.c_str(), path.c_str());
  }
  return todo;
}

}  // namespace spb
