// Result CSVs: the schema header, rows appended and flushed one at a time, a rerun recognising the rows already there,
// and a file with another header refused rather than mixed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "runtime/csv.h"
#include "runtime/error.h"

namespace spb {
namespace {

ResultRow row(const std::string& method, double ms) {
  ResultRow r;
  r.set("level", std::string("operator")).set("method", method).set("world_size", 4).set("time_ms_mean", ms);
  return r;
}

TEST(Csv, AppendsRowsAndRecognisesThemOnRerun) {
  const std::string path = testing::TempDir() + "/spb_csv_rows.csv";
  std::remove(path.c_str());
  {
    CsvAppender csv(path);
    EXPECT_FALSE(csv.contains(row("zeco", 1.0)));
    csv.append(row("zeco", 1.5));
    EXPECT_TRUE(csv.contains(row("zeco", 9.0)));  // same configuration, another time: already measured
  }
  CsvAppender again(path);
  EXPECT_TRUE(again.contains(row("zeco", 2.0)));
  EXPECT_FALSE(again.contains(row("lasp2", 2.0)));
  again.append(row("lasp2", 2.25));

  const auto rows = read_csv(path);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].at("method"), "zeco");
  EXPECT_EQ(rows[0].at("time_ms_mean"), "1.5");
  EXPECT_EQ(rows[1].at("time_ms_mean"), "2.25");
  EXPECT_EQ(rows[1].at("err_rel_rms"), "");  // unset: an empty field, never a made-up value
  for (const auto& c : schema_columns()) EXPECT_TRUE(rows[0].count(c)) << c;
}

TEST(Csv, RefusesAFileWithAnotherHeader) {
  const std::string path = testing::TempDir() + "/spb_csv_other.csv";
  std::ofstream(path) << "a,b,c\n1,2,3\n";
  EXPECT_THROW(CsvAppender csv(path), UsageError);
}

TEST(Csv, ValuesNeverBreakTheColumns) {
  ResultRow r;
  r.set("gpu", std::string("NVIDIA H200, rev \"A\""));
  EXPECT_EQ(r.get("gpu").find(','), std::string::npos);
  r.set("err_rel_rms", std::nan(""));
  EXPECT_EQ(r.get("err_rel_rms"), "");
}

}  // namespace
}  // namespace spb
