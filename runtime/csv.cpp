#include "runtime/csv.h"

#include <libfccp/csv.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "runtime/error.h"

namespace spb {

const std::vector<std::string>& schema_columns() {
  static const std::vector<std::string> cols = {
      // DESIGN §6: every results CSV has these, in this order
      "level", "method", "backend", "world_size", "batch", "heads", "dk", "dv", "tokens_per_rank", "block_elems",
      "dtype", "pass", "time_ms_mean", "time_ms_median", "time_ms_min", "time_ms_max", "err_rel_rms",
      "tokens_per_s_per_gpu", "gpu", "git_sha", "date",
      // and these, for every level
      "chunk", "blocks", "comm", "warmup", "iters", "time_ms_cv", "time_ms_mean_over_ranks", "host", "driver", "cuda",
      "nccl", "mpi", "overlap"};
  return cols;
}

const std::vector<std::string>& config_columns() {
  // `bytes` tells collective rows apart (heads is 0 when a size is not a whole number of dk x dv states), `timing`
  // rows timed with an event per call from those timed per group of calls, `comm` the transport (nccl, or
  // nccl-socket between nodes simulated over the network).
  static const std::vector<std::string> cols = {"level", "method", "backend", "world_size", "batch", "heads", "dk",
                                                "dv", "tokens_per_rank", "block_elems", "bytes", "dtype", "pass",
                                                "overlap", "head_groups", "timing", "layers", "hidden", "vocab",
                                                "expand_k", "expand_v", "mlp", "recompute", "grad_overlap",
                                                "shard_optimizer", "nodes", "ranks_per_node", "comm", "gpu",
                                                "git_sha"};
  return cols;
}

ResultRow& ResultRow::set(const std::string& col, const std::string& value) {
  std::string v = value;
  for (char& c : v)
    if (c == ',' || c == '\n' || c == '"') c = ';';  // values never need quoting
  fields_[col] = v;
  return *this;
}

ResultRow& ResultRow::set(const std::string& col, double value) {
  if (std::isnan(value)) return set(col, std::string());
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", value);
  return set(col, std::string(buf));
}

ResultRow& ResultRow::set(const std::string& col, long long value) { return set(col, std::to_string(value)); }

const std::string& ResultRow::get(const std::string& col) const {
  static const std::string empty;
  auto it = fields_.find(col);
  return it == fields_.end() ? empty : it->second;
}

std::string ResultRow::key() const {
  std::string k;
  for (auto& c : config_columns()) k += get(c) + ",";
  return k;
}

namespace {
std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}
std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + v[i];
  return s;
}
bool exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}
}  // namespace

std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  std::vector<std::map<std::string, std::string>> rows;
  try {
    io::LineReader in(path);
    char* line = in.next_line();
    if (!line) return rows;
    const std::vector<std::string> header = split(line);
    while ((line = in.next_line())) {
      if (!*line) continue;
      std::vector<std::string> cells = split(line);
      SPB_USAGE(cells.size() == header.size(), path + ":" + std::to_string(in.get_file_line()) + ": " +
                                                   std::to_string(cells.size()) + " fields, the header has " +
                                                   std::to_string(header.size()));
      std::map<std::string, std::string> row;
      for (size_t i = 0; i < header.size(); ++i) row[header[i]] = cells[i];
      rows.push_back(std::move(row));
    }
  } catch (const io::error::base& e) {
    throw UsageError(path + ": " + e.what());
  }
  return rows;
}

CsvAppender::CsvAppender(std::string path, std::vector<std::string> extra) : path_(std::move(path)) {
  columns_ = schema_columns();
  columns_.insert(columns_.end(), extra.begin(), extra.end());
  if (exists(path_)) {
    std::ifstream in(path_);
    std::string header;
    std::getline(in, header);
    SPB_USAGE(header == join(columns_), "--csv " + path_ +
                                            ": the file exists with other columns; write to a new file (the header "
                                            "must be: " + join(columns_) + ")");
    for (auto& r : read_csv(path_)) {
      ResultRow row;
      for (auto& [k, v] : r) row.set(k, v);
      existing_keys_.push_back(row.key());
    }
  } else {
    std::ofstream out(path_);
    SPB_USAGE(bool(out), "--csv " + path_ + ": cannot create the file");
    out << join(columns_) << "\n";
  }
}

bool CsvAppender::contains(const ResultRow& row) const {
  const std::string k = row.key();
  for (auto& e : existing_keys_)
    if (e == k) return true;
  return false;
}

void CsvAppender::append(const ResultRow& row) {
  std::vector<std::string> cells;
  for (auto& c : columns_) cells.push_back(row.get(c));
  std::ofstream out(path_, std::ios::app);
  SPB_USAGE(bool(out), "--csv " + path_ + ": cannot append");
  out << join(cells) << "\n";
  out.flush();
  existing_keys_.push_back(row.key());
}

}  // namespace spb
