#include "harness/timeline_csv.h"

#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime/collective_errors.h"
#include "runtime/error.h"

namespace spb {

namespace {
const char* const kTimelineHeader =
    "method,backend,world_size,tokens_per_rank,heads,dk,dv,gpu,git_sha,date,overlap,iteration,rank,stream,span,start_us,"
    "end_us";
}  // namespace

std::string timeline_prefix(const ResultRow& r) {
  std::string prefix;
  for (const char* c :
       {"method", "backend", "world_size", "tokens_per_rank", "heads", "dk", "dv", "gpu", "git_sha", "date", "overlap"})
    prefix += (prefix.empty() ? "" : ",") + r.get(c);
  return prefix;
}

std::string timeline_lines(const Runtime& rt, Timeline& tl, const std::string& prefix, int it) {
  std::string lines;
  char buf[256];
  for (const auto& s : tl.read()) {
    std::snprintf(buf, sizeof buf, "%s,%d,%d,%s,%s,%.3f,%.3f\n", prefix.c_str(), it, rt.rank(), s.stream.c_str(),
                  s.name.c_str(), s.start_us, s.end_us);
    lines += buf;
  }
  return lines;
}

void append_timeline_csv(Runtime& rt, std::string lines, const std::string& path) {
  const size_t len = size_t(rt.boot.max(double(lines.size())));
  lines.resize(len, '\0');
  const std::vector<char> all = rt.boot.gather(lines.data(), len);
  // Collective from here on: a file rank 0 cannot write stops every rank with the same error.
  agree_on_usage_errors(rt.boot, [&] {
    if (rt.rank() != 0) return;
    std::string text;
    FILE* f = std::fopen(path.c_str(), "r");
    char head[512] = "";
    const bool empty = !f || !std::fgets(head, sizeof head, f);
    if (f) std::fclose(f);
    // rows of another layout would not parse: say so instead of appending to them
    SPB_USAGE(empty || std::string(head) == std::string(kTimelineHeader) + "\n",
              "--timeline " + path + ": its header is not this spbench's (" + kTimelineHeader + "); give a new file");
    if (empty) text = std::string(kTimelineHeader) + "\n";
    for (size_t r = 0; r < all.size(); r += len) text.append(all.data() + r, strnlen(all.data() + r, len));
    append_whole("--timeline", path, text);
  });
}

}  // namespace spb
