// spbench compare: a file against itself passes, an injected 20% slowdown fails (exit 1) and a 20% speedup passes as
// faster; the noise threshold is the larger of --threshold and the rows' own spread; rows are matched without
// git_sha and date (comparing two commits), the newest row of a configuration counts, rows in one file only are
// listed; a malformed CSV is a UsageError that names the file.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "report/src/compare.h"
#include "runtime/csv.h"
#include "runtime/error.h"

namespace spb {
namespace {

ResultRow op_row(const std::string& method, int P, double ms, double cv, const std::string& sha = "aaa",
                 const std::string& date = "2026-01-01T00:00:00Z") {
  ResultRow r;
  r.set("level", std::string("operator")).set("method", method).set("backend", std::string("nccl"));
  r.set("world_size", P).set("batch", 1).set("heads", 16).set("dk", 128).set("dv", 128).set("tokens_per_rank", 16384);
  r.set("block_elems", 0).set("dtype", std::string("bf16")).set("pass", std::string("fwd_bwd"));
  r.set("gpu", std::string("NVIDIA H200")).set("git_sha", sha).set("date", date);
  r.set("time_ms_mean", ms).set("time_ms_min", ms * 0.99).set("time_ms_max", ms * 1.01).set("time_ms_cv", cv);
  return r;
}

std::string write(const std::string& name, const std::vector<ResultRow>& rows) {
  const std::string path = testing::TempDir() + "/spb_compare_" + name + ".csv";
  std::remove(path.c_str());
  CsvAppender csv(path);
  for (auto& r : rows) csv.append(r);
  return path;
}

std::vector<ResultRow> base_rows(double scale = 1.0, const std::string& sha = "aaa") {
  return {op_row("dp", 4, 6.4 * scale, 0.01, sha), op_row("zeco", 4, 7.3 * scale, 0.01, sha),
          op_row("lasp2", 4, 19.4 * scale, 0.01, sha)};
}

int run(const std::string& a, const std::string& b, std::string* out = nullptr, double threshold = 0.05) {
  CompareOptions o;
  o.base = a, o.next = b, o.threshold = threshold;
  testing::internal::CaptureStdout();
  const int rc = run_compare(o);
  const std::string s = testing::internal::GetCapturedStdout();
  if (out) *out = s;
  return rc;
}

TEST(Compare, AFileAgainstItselfPasses) {
  const std::string base = write("self", base_rows());
  std::string out;
  EXPECT_EQ(run(base, base, &out), 0);
  EXPECT_NE(out.find("faster 0, same 3, slower 0"), std::string::npos) << out;
}

TEST(Compare, ATwentyPercentSlowdownFails) {
  const std::string base = write("base", base_rows());
  const std::string slow = write("slow", base_rows(1.2, "bbb"));  // another commit: matched all the same
  std::string out;
  EXPECT_EQ(run(base, slow, &out), 1);
  EXPECT_NE(out.find("SLOWER"), std::string::npos) << out;
  EXPECT_NE(out.find("slower 3"), std::string::npos) << out;
  EXPECT_NE(out.find("+20.0%"), std::string::npos) << out;
  EXPECT_NE(out.find("REGRESSION"), std::string::npos) << out;
}

TEST(Compare, ATwentyPercentSpeedupPassesAsFaster) {
  const std::string base = write("base2", base_rows());
  const std::string fast = write("fast", base_rows(0.8, "ccc"));
  std::string out;
  EXPECT_EQ(run(base, fast, &out), 0);
  EXPECT_NE(out.find("faster 3, same 0, slower 0"), std::string::npos) << out;
}

TEST(Compare, TheThresholdIsTheLargerOfTheFlagAndTheRowsSpread) {
  const auto b = read_csv(write("noise_b", {op_row("zeco", 4, 10.0, 0.01), op_row("dp", 4, 10.0, 0.12)}));
  // +8%: beyond 5% for the quiet row, inside the noisy row's 12% spread.
  const auto n = read_csv(write("noise_n", {op_row("zeco", 4, 10.8, 0.01), op_row("dp", 4, 10.8, 0.01)}));
  const Comparison c = compare_rows(b, n, 0.05);
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.rows[0].verdict, Verdict::slower);
  EXPECT_DOUBLE_EQ(c.rows[0].threshold, 0.05);
  EXPECT_EQ(c.rows[1].verdict, Verdict::same);
  EXPECT_DOUBLE_EQ(c.rows[1].threshold, 0.12);
  // A larger flag wins over a small spread; +3% is noise by default.
  EXPECT_EQ(compare_rows(b, n, 0.10).rows[0].verdict, Verdict::same);
  const auto small = read_csv(write("noise_s", {op_row("zeco", 4, 10.3, 0.01), op_row("dp", 4, 10.3, 0.01)}));
  EXPECT_EQ(compare_rows(b, small, 0.05).count(Verdict::same), 2);
}

TEST(Compare, SpreadFromMinMaxWhenNoCv) {
  std::map<std::string, std::string> r = {{"time_ms_mean", "10"}, {"time_ms_min", "8"}, {"time_ms_max", "12"}};
  EXPECT_DOUBLE_EQ(row_spread(r), 0.2);
  r["time_ms_cv"] = "0.03";
  EXPECT_DOUBLE_EQ(row_spread(r), 0.03);
  EXPECT_DOUBLE_EQ(row_spread({{"time_ms_mean", "10"}}), 0.0);
}

TEST(Compare, RowsInOneFileOnlyAreListedAndTheNewestRowCounts) {
  auto base = base_rows();
  base.push_back(op_row("ring", 4, 30, 0.01));
  auto next = base_rows();
  next.push_back(op_row("ulysses", 4, 9, 0.01));
  // A rerun of zeco in the new file: the newer row (20% slower) is the one compared.
  next.push_back(op_row("zeco", 4, 7.3 * 1.2, 0.01, "ddd", "2026-02-01T00:00:00Z"));
  const Comparison c = compare_rows(read_csv(write("only_b", base)), read_csv(write("only_n", next)), 0.05);
  ASSERT_EQ(c.only_base.size(), 1u);
  EXPECT_NE(c.only_base[0].find("method=ring"), std::string::npos);
  ASSERT_EQ(c.only_new.size(), 1u);
  EXPECT_NE(c.only_new[0].find("method=ulysses"), std::string::npos);
  EXPECT_EQ(c.count(Verdict::slower), 1);
  EXPECT_EQ(c.count(Verdict::same), 2);
  std::string out;
  EXPECT_EQ(run(write("only_b2", base), write("only_n2", next), &out), 1);
  EXPECT_NE(out.find("only in base (1)"), std::string::npos) << out;
  EXPECT_NE(out.find("only in new (1)"), std::string::npos) << out;
}

TEST(Compare, NoRowInCommonFailsAndSaysSo) {
  auto base = base_rows();
  std::vector<ResultRow> other = {op_row("ring", 8, 30, 0.01), op_row("ulysses", 8, 9, 0.01)};
  std::string out;
  EXPECT_EQ(run(write("disjoint_b", base), write("disjoint_n", other), &out), 1);
  EXPECT_NE(out.find("no row in common"), std::string::npos) << out;
}

TEST(Compare, CollectiveRowsOfDifferentSizesDoNotCollide) {
  auto coll = [](double bytes, double ms) {
    ResultRow r;
    r.set("level", std::string("collective")).set("method", std::string("allscan")).set("world_size", 4);
    r.set("heads", 0).set("dk", 128).set("dv", 128).set("bytes", bytes).set("time_ms_mean", ms);
    return r;
  };
  std::vector<std::map<std::string, std::string>> a, b;
  for (auto* rows : {&a, &b})
    for (double bytes : {98304.0, 196608.0}) {
      const ResultRow r = coll(bytes, bytes / 1e5);
      rows->push_back(r.fields());
    }
  const Comparison c = compare_rows(a, b, 0.05);
  EXPECT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.count(Verdict::same), 2);
}

// A collective row written before the `timing` column was timed back to back: it matches a newer back-to-back row,
// never a latency one.
TEST(Compare, ACollectiveRowWithoutTimingIsBackToBack) {
  auto coll = [](const std::string& timing, double ms) {
    ResultRow r;
    r.set("level", std::string("collective")).set("method", std::string("chain")).set("world_size", 4);
    r.set("bytes", 2097152.0).set("time_ms_mean", ms);
    if (!timing.empty()) r.set("timing", timing);
    return r.fields();
  };
  const Comparison c = compare_rows({coll("", 0.080)}, {coll("back_to_back", 0.081), coll("latency", 0.4)}, 0.05);
  ASSERT_EQ(c.rows.size(), 1u);
  EXPECT_EQ(c.count(Verdict::same), 1);
  ASSERT_EQ(c.only_new.size(), 1u);
  EXPECT_NE(c.only_new[0].find("timing=latency"), std::string::npos) << c.only_new[0];
}

TEST(Compare, AMalformedCsvIsAUsageErrorNamingTheFile) {
  const std::string bad = testing::TempDir() + "/spb_compare_bad.csv";
  std::ofstream(bad) << "level,method,world_size,time_ms_mean\noperator,zeco,4\n";
  const std::string good = write("good", base_rows());
  try {
    run(good, bad);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    testing::internal::GetCapturedStdout();
    EXPECT_NE(std::string(e.what()).find(bad + ":2: 3 fields, the header has 4"), std::string::npos) << e.what();
  }
  const std::string other = testing::TempDir() + "/spb_compare_other.csv";
  std::ofstream(other) << "a,b\n1,2\n";
  EXPECT_THROW(read_results_for_compare(other), UsageError);
  EXPECT_THROW(read_results_for_compare("/nonexistent/x.csv"), UsageError);
}

}  // namespace
}  // namespace spb
