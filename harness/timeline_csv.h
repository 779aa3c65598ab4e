// The timeline CSV (sp/timeline.h records the spans): one row per span of every rank, written by rank 0. The
// operator level records whole forward + backward iterations, the model level whole training steps.
#pragma once

#include <string>

#include "runtime/csv.h"
#include "sp/runtime.h"
#include "sp/timeline.h"

namespace spb {

// The columns: the row's identity (timeline_prefix), then one span.
extern const char* const kTimelineHeader;
// The identity columns of a result row, joined: method, backend, world_size, tokens_per_rank, heads, dk, dv, gpu,
// git_sha, date, overlap.
std::string timeline_prefix(const ResultRow& r);
// Iteration `it`'s spans of this rank, one CSV line each.
std::string timeline_lines(const Runtime& rt, Timeline& tl, const std::string& prefix, int it);
// Every rank's `lines` appended to `path` by rank 0 (collective); the header where the file is new, and a UsageError
// naming the flag where the file has another one.
void append_timeline_csv(Runtime& rt, std::string lines, const std::string& path);

}  // namespace spb
