// Result rows (DESIGN §6): tidy, self-describing, appended one at a time and flushed, so a sweep that stops half-way
// keeps every finished row and a rerun can skip the rows already there.
#pragma once

#include <map>
#include <utility>
#include <string>
#include <vector>

namespace spb {

// The columns every results CSV starts with, in this order; a level may append more after them.
const std::vector<std::string>& schema_columns();
// The columns that say what was run (not what was measured): a rerun skips a row whose key is already in the file.
const std::vector<std::string>& config_columns();

// The `config_key` column: FNV-1a 64 (16 hex digits) of `flag=value` lines, one for every flag that changes what is
// computed or how it is timed and has no column of its own (--seed, -n, -w, --tolerance, ...). It is part of key(),
// so a rerun that changes any of them measures again.
std::string config_key(const std::vector<std::pair<std::string, std::string>>& flags);

class ResultRow {
 public:
  ResultRow& set(const std::string& col, const std::string& value);
  ResultRow& set(const std::string& col, double value);  // %.6g; NaN is written as an empty field
  ResultRow& set(const std::string& col, long long value);
  ResultRow& set(const std::string& col, int value) { return set(col, (long long)value); }
  const std::string& get(const std::string& col) const;  // "" when unset
  std::string key() const;                               // the config columns and config_key, joined
  const std::map<std::string, std::string>& fields() const { return fields_; }

 private:
  std::map<std::string, std::string> fields_;
};

class CsvAppender {
 public:
  // Opens (creating with a header if new) `path`, whose columns are the schema followed by `extra` columns and
  // config_key. An existing file must have exactly that header, or that header without config_key (a file written
  // before the column: its rows are matched without it, and a note on stderr says so), or either without the late
  // columns (late_columns(): a file written before them takes rows that hold their default, and refuses others).
  CsvAppender(std::string path, std::vector<std::string> extra = {});
  bool contains(const ResultRow& row) const;  // a row with the same key() is already in the file
  void append(const ResultRow& row);           // written and flushed at once
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  std::string path_;
  std::vector<std::string> columns_;
  std::vector<std::string> existing_keys_;
  bool without_config_key_ = false;  // an existing file from before the config_key column
  std::vector<std::string> absent_late_;  // the late columns an existing file was written without
};

// Columns added after results files existed, each with the value its older rows stand for: `attention`, "gla" (the
// operator level's family; DESIGN §6).
const std::vector<std::pair<std::string, std::string>>& late_columns();

// Rows of a results CSV as column -> value maps (read with libfccp). A last line without its newline (a row cut short
// by a full disk or a killed writer) is a UsageError naming the file and line, unless `ignore_unterminated`: then it
// is left out and reported on stderr.
std::vector<std::map<std::string, std::string>> read_csv(const std::string& path, bool ignore_unterminated = false);

// Checks, before anything is measured, that the file `path` given by `flag` can be written: its directory exists,
// it is a regular file or absent, it can be opened for appending, and its file system has room for a row. A
// UsageError naming the flag and the file otherwise. Creates nothing.
void check_output_file(const std::string& flag, const std::string& path);
// The same for a directory of output files (created, with its parents, where absent).
void check_output_dir(const std::string& flag, const std::string& dir);
// Appends `text` to `path` with one write(2), then fsync: all of it or, on a short write or any error, none of it
// (the file is cut back to its previous length) and a UsageError naming `flag`, the file and the reason.
void append_whole(const std::string& flag, const std::string& path, const std::string& text);

// `spbench csv repair FILE`: drops a last line without its newline, keeping the file as FILE.bak first; prints what
// it removed (or that there was nothing to remove) and returns 0.
int repair_csv(const std::string& path);

}  // namespace spb
