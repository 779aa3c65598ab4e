// Result rows (DESIGN §6): tidy, self-describing, appended one at a time and flushed, so a sweep that stops half-way
// keeps every finished row and a rerun can skip the rows already there.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace spb {

// The columns every results CSV starts with, in this order; a level may append more after them.
const std::vector<std::string>& schema_columns();
// The columns that say what was run (not what was measured): a rerun skips a row whose key is already in the file.
const std::vector<std::string>& config_columns();

class ResultRow {
 public:
  ResultRow& set(const std::string& col, const std::string& value);
  ResultRow& set(const std::string& col, double value);  // %.6g; NaN is written as an empty field
  ResultRow& set(const std::string& col, long long value);
  ResultRow& set(const std::string& col, int value) { return set(col, (long long)value); }
  const std::string& get(const std::string& col) const;  // "" when unset
  std::string key() const;                               // the config columns, joined
  const std::map<std::string, std::string>& fields() const { return fields_; }

 private:
  std::map<std::string, std::string> fields_;
};

class CsvAppender {
 public:
  // Opens (creating with a header if new) `path`, whose columns are the schema followed by `extra` columns.
  // An existing file must have exactly that header.
  CsvAppender(std::string path, std::vector<std::string> extra = {});
  bool contains(const ResultRow& row) const;  // a row with the same key() is already in the file
  void append(const ResultRow& row);           // written and flushed at once
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  std::string path_;
  std::vector<std::string> columns_;
  std::vector<std::string> existing_keys_;
};

// Rows of a results CSV as column -> value maps (read with libfccp).
std::vector<std::map<std::string, std::string>> read_csv(const std::string& path);

}  // namespace spb
