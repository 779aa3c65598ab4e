// Result CSVs: the schema header, rows appended and flushed one at a time, a rerun recognising the rows already there,
// and a file with another header refused rather than mixed; a row written whole or not at all, a row cut short named,
// left out or repaired; output paths checked before anything runs; the config_key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

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

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Csv, AFailedWriteLeavesNothingOfIt) {
  // /dev/full takes the open and fails every write with ENOSPC
  EXPECT_THROW(append_whole("--csv", "/dev/full", "a,b,c\n"), UsageError);
  try {
    append_whole("--csv", "/dev/full", "a,b,c\n");
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--csv /dev/full: a write failed"), std::string::npos) << e.what();
  }
}

TEST(Csv, OutputPathsAreCheckedUpFront) {
  EXPECT_THROW(check_output_file("--csv", "/dev/full"), UsageError);        // a device
  EXPECT_THROW(check_output_file("--csv", testing::TempDir()), UsageError);  // a directory
  EXPECT_THROW(check_output_file("--csv", "/nonexistent/x.csv"), UsageError);
  EXPECT_THROW(check_output_dir("--outputs", "/proc/spb_no_such_dir"), UsageError);
  const std::string fresh = testing::TempDir() + "/spb_csv_fresh.csv";
  std::remove(fresh.c_str());
  EXPECT_NO_THROW(check_output_file("--csv", fresh));
  EXPECT_NE(access(fresh.c_str(), F_OK), 0);  // the check creates nothing
}

TEST(Csv, ARowCutShortIsNamedLeftOutOrRepaired) {
  const std::string path = testing::TempDir() + "/spb_csv_half.csv";
  std::remove(path.c_str());
  std::remove((path + ".bak").c_str());
  {
    CsvAppender csv(path);
    csv.append(row("zeco", 1.5));
  }
  const std::string whole = contents(path);
  std::ofstream(path, std::ios::app) << "operator,lasp1,cpu";  // a killed writer's half row
  try {
    read_csv(path);
    ADD_FAILURE() << "a half row was read";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":3: the last line has no newline"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_csv(path, true).size(), 1u);  // resume: left out
  EXPECT_EQ(repair_csv(path), 0);
  EXPECT_EQ(contents(path), whole);
  EXPECT_EQ(contents(path + ".bak"), whole + "operator,lasp1,cpu");
  EXPECT_EQ(read_csv(path).size(), 1u);

  std::ofstream(path, std::ios::app) << "operator,lasp1";
  {
    CsvAppender csv(path);  // the appender cuts it before appending, so no row runs into it
    EXPECT_TRUE(csv.contains(row("zeco", 0)));
    csv.append(row("lasp2", 2.0));
  }
  const auto rows = read_csv(path);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].at("method"), "lasp2");
}

TEST(Csv, TheConfigKeyIsPartOfTheKey) {
  EXPECT_EQ(config_key({{"seed", "1"}, {"iters", "5"}}), config_key({{"seed", "1"}, {"iters", "5"}}));
  EXPECT_NE(config_key({{"seed", "1"}}), config_key({{"seed", "2"}}));
  EXPECT_EQ(config_key({}).size(), 16u);
  ResultRow a = row("zeco", 1), b = row("zeco", 1);
  a.set("config_key", config_key({{"seed", "1"}}));
  b.set("config_key", config_key({{"seed", "2"}}));
  EXPECT_NE(a.key(), b.key());
}

TEST(Csv, AFileWithoutConfigKeyIsStillAppended) {
  const std::string path = testing::TempDir() + "/spb_csv_old.csv";
  std::string header;
  for (const auto& c : schema_columns()) header += (header.empty() ? "" : ",") + c;
  std::ofstream(path, std::ios::trunc) << header << "\n";
  ResultRow r = row("zeco", 1);
  r.set("config_key", config_key({{"seed", "1"}}));
  {
    CsvAppender csv(path);
    EXPECT_EQ(csv.columns().back(), schema_columns().back());
    csv.append(r);
  }
  CsvAppender again(path);
  EXPECT_TRUE(again.contains(r));
  EXPECT_EQ(read_csv(path).size(), 1u);
}

}  // namespace
}  // namespace spb
