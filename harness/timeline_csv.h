// The timeline CSV (sp/timeline.h records the spans): one row per span of every rank, written by rank 0. The
// operator level records whole forward + backward iterations, the model level whole training steps.
#pragma once

#include <string>

#include "runtime/csv.h"
#include "sp/runtime.h"
#include "sp/timeline.h"

namespace spb {

// The identity columns of a result row, joined: method, backend, world_size, tokens_per_rank, heads, dk, dv, gpu,
// git_sha, date, overlap.
std::string timeline_prefix(const ResultRow& r);
// Iteration `it`'s spans of this rank, one CSV line each.
std::string timeline_lines(const Runtime& rt, Timeline& tl, const std::string& prefix, int it);
// Every rank's `lines` appended to `path` by rank 0 (collective); the header where the file is new (the identity
// columns, then one span), and a UsageError naming the flag where the file has another one.
void append_timeline_csv(Runtime& rt, std::string lines, const std::string& path);

// `iters` iterations of `iteration(it)` with every span recorded, each started like a timed one (synchronised, after
// a barrier), then every rank's spans appended to `path` (collective). One more comes first, it = -1, and is not
// kept: it creates the timeline's events, which would otherwise stall the host inside a recorded iteration (a GPU
// run showed 0.2-0.4 ms scan spans there against ~65 us per scan in the timed loop).
template <class Iteration>
void record_timeline(Runtime& rt, int iters, const std::string& prefix, const std::string& path, Iteration iteration) {
  Timeline tl(*rt.dev);
  std::string lines;
  for (int it = -1; it < iters; ++it) {
    rt.dev->synchronize();
    rt.boot.barrier();
    rt.timeline = &tl;
    tl.start();
    iteration(it);
    rt.timeline = nullptr;
    if (it >= 0) lines += timeline_lines(rt, tl, prefix, it);
  }
  append_timeline_csv(rt, std::move(lines), path);
}

}  // namespace spb
