#include "runtime/csv.h"

#include <libfccp/csv.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

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
  return k + get("config_key");
}

std::string config_key(const std::vector<std::pair<std::string, std::string>>& flags) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& [flag, value] : flags)
    for (char c : flag + "=" + value + "\n") h = (h ^ (unsigned char)c) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
  return buf;
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
}  // namespace

namespace {
// The whole file; UsageError naming it where it cannot be read.
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SPB_USAGE(bool(in), path + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
// The number of the last line when it has no newline (a row cut short), else 0.
size_t unterminated_line(const std::string& path) {
  const std::string text = slurp(path);
  if (text.empty() || text.back() == '\n') return 0;
  return size_t(std::count(text.begin(), text.end(), '\n')) + 1;
}
}  // namespace

std::vector<std::map<std::string, std::string>> read_csv(const std::string& path, bool ignore_unterminated) {
  std::vector<std::map<std::string, std::string>> rows;
  struct stat st;
  SPB_USAGE(stat(path.c_str(), &st) == 0, path + ": cannot open (" + std::strerror(errno) + ")");
  SPB_USAGE(S_ISREG(st.st_mode), path + ": not a regular file");
  const size_t cut = unterminated_line(path);
  if (cut) {
    SPB_USAGE(ignore_unterminated, path + ":" + std::to_string(cut) +
                                       ": the last line has no newline (a row cut short); spbench csv repair " + path +
                                       " removes it");
    std::fprintf(stderr, "spbench: note: %s:%zu: the last line has no newline (a row cut short): left out\n",
                 path.c_str(), cut);
  }
  try {
    io::LineReader in(path);
    char* line = in.next_line();
    if (!line || cut == 1) return rows;
    const std::vector<std::string> header = split(line);
    while ((line = in.next_line())) {
      if (cut && size_t(in.get_file_line()) == cut) break;
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

namespace {
constexpr unsigned long long kRowRoom = 4096;  // free bytes a file system needs for a row: one block

std::string parent_of(const std::string& path) {
  const std::string d = std::filesystem::path(path).parent_path().string();
  return d.empty() ? "." : d;
}

void require_room(const std::string& flag, const std::string& path, const std::string& on) {
  struct statvfs fs;
  if (statvfs(on.c_str(), &fs) != 0 || fs.f_blocks == 0) return;  // no figures to go by (a pseudo file system)
  const unsigned long long room = (unsigned long long)fs.f_bavail * fs.f_frsize;
  SPB_USAGE(room >= kRowRoom, flag + " " + path + ": its file system is full (" + std::to_string(room) +
                                  " bytes free)");
}

void probe_create(const std::string& flag, const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  SPB_USAGE(fd >= 0, flag + " " + what + ": cannot create a file there (" + std::strerror(errno) + ")");
  ::close(fd);
  ::unlink(path.c_str());
}
}  // namespace

void check_output_file(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    SPB_USAGE(!S_ISDIR(st.st_mode), flag + " " + path + ": is a directory; give a file");
    SPB_USAGE(S_ISREG(st.st_mode), flag + " " + path + ": not a regular file (a device, pipe or socket); give a file");
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    SPB_USAGE(fd >= 0, flag + " " + path + ": cannot be appended (" + std::strerror(errno) + ")");
    ::close(fd);
  } else {
    const std::string dir = parent_of(path);
    struct stat ds;
    SPB_USAGE(stat(dir.c_str(), &ds) == 0, flag + " " + path + ": its directory " + dir + " does not exist");
    SPB_USAGE(S_ISDIR(ds.st_mode), flag + " " + path + ": " + dir + " is not a directory");
    probe_create(flag, path, path);
  }
  require_room(flag, path, parent_of(path));
}

void check_output_dir(const std::string& flag, const std::string& dir) {
  if (dir.empty()) return;
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    SPB_USAGE(S_ISDIR(st.st_mode), flag + " " + dir + ": not a directory");
  } else {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    SPB_USAGE(!ec, flag + " " + dir + ": cannot create the directory (" + ec.message() + ")");
  }
  probe_create(flag, dir + "/.spbench_probe_" + std::to_string(::getpid()), dir);
  require_room(flag, dir, dir);
}

void append_whole(const std::string& flag, const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  SPB_USAGE(fd >= 0, flag + " " + path + ": cannot append (" + std::strerror(errno) + ")");
  struct stat st;
  const off_t before = fstat(fd, &st) == 0 ? st.st_size : -1;
  std::string why;
  const ssize_t n = ::write(fd, text.data(), text.size());
  if (n < 0) why = std::strerror(errno);
  else if (size_t(n) != text.size())
    why = "a short write, " + std::to_string(n) + " of " + std::to_string(text.size()) + " bytes";
  else if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS)  // EINVAL: a file that cannot be synced
    why = std::string("fsync: ") + std::strerror(errno);
  if (!why.empty() && before >= 0) (void)!::ftruncate(fd, before);  // no half row stays behind
  if (::close(fd) != 0 && why.empty()) why = std::string("close: ") + std::strerror(errno);
  SPB_USAGE(why.empty(), flag + " " + path + ": a write failed (" + why + "); the file keeps what it held before, whole");
}

namespace {
// Cuts a last line without its newline off `path` (the file as it was kept in FILE.bak) and says what went, or ""
// where every line ends in a newline.
std::string cut_unterminated(const std::string& path, const std::string& flag) {
  struct stat st;
  SPB_USAGE(stat(path.c_str(), &st) == 0, flag + " " + path + ": cannot open (" + std::strerror(errno) + ")");
  SPB_USAGE(S_ISREG(st.st_mode), flag + " " + path + ": not a regular file");
  const std::string text = slurp(path);
  if (text.empty() || text.back() == '\n') return "";
  const size_t cut = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  const std::string half = text.substr(cut);
  const std::string bak = path + ".bak";
  {
    std::ofstream out(bak, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    SPB_USAGE(bool(out), flag + " " + path + ": cannot write the copy " + bak);
  }
  SPB_USAGE(::truncate(path.c_str(), off_t(cut)) == 0,
            flag + " " + path + ": cannot cut the file (" + std::strerror(errno) + ")");
  char buf[256];
  std::snprintf(buf, sizeof buf, ":%zu: removed a row cut short (%zu bytes, %zu fields, no newline: %.40s%s); the file "
                "as it was is in ", size_t(std::count(text.begin(), text.end(), '\n')) + 1, half.size(),
                split(half).size(), half.c_str(), half.size() > 40 ? "..." : "");
  return path + buf + bak;
}
}  // namespace

int repair_csv(const std::string& path) {
  const std::string what = cut_unterminated(path, "csv repair");
  if (what.empty()) std::printf("%s: nothing to repair (every line ends in a newline)\n", path.c_str());
  else std::printf("%s\n", what.c_str());
  return 0;
}

const std::vector<std::pair<std::string, std::string>>& late_columns() {
  static const std::vector<std::pair<std::string, std::string>> cols = {{"attention", "gla"}};
  return cols;
}

CsvAppender::CsvAppender(std::string path, std::vector<std::string> extra) : path_(std::move(path)) {
  columns_ = schema_columns();
  columns_.insert(columns_.end(), extra.begin(), extra.end());
  columns_.push_back("config_key");
  check_output_file("--csv", path_);
  struct stat st;
  if (stat(path_.c_str(), &st) == 0 && st.st_size > 0) {
    std::ifstream in(path_);
    std::string header;
    std::getline(in, header);
    // The header as it stands, or as a file from before the late columns has it; either may lack config_key.
    std::vector<std::string> without_late;
    for (const std::string& c : columns_) {
      bool late = false;
      for (const auto& l : late_columns()) late = late || l.first == c;
      if (late) absent_late_.push_back(c);
      else without_late.push_back(c);
    }
    auto no_key = [](std::vector<std::string> v) {
      v.pop_back();
      return join(v);
    };
    if (header == join(columns_) || header == no_key(columns_)) absent_late_.clear();
    else if (header == join(without_late) || header == no_key(without_late)) columns_ = without_late;
    SPB_USAGE(header == join(columns_) || header == no_key(columns_),
              "--csv " + path_ + ": the file exists with other columns; write to a new file (the header must be: " +
                  join(columns_) + ")");
    const std::string without_key = no_key(columns_);
    if (header == without_key) {
      columns_.pop_back();
      without_config_key_ = true;
      std::fprintf(stderr,
                   "spbench: note: --csv %s has no config_key column: its rows are matched on their other columns "
                   "(--seed, -n, -w, --tolerance and the like not among them); a new file keys on them all\n",
                   path_.c_str());
    }
    // A row cut short would run into the next one appended: it goes (the file as it was kept in FILE.bak).
    const std::string cut = cut_unterminated(path_, "--csv");
    if (!cut.empty()) std::fprintf(stderr, "spbench: note: --csv %s\n", cut.c_str());
    for (auto& r : read_csv(path_)) {
      ResultRow row;
      for (auto& [k, v] : r) row.set(k, v);
      existing_keys_.push_back(row.key());
    }
  } else {
    append_whole("--csv", path_, join(columns_) + "\n");
  }
}

bool CsvAppender::contains(const ResultRow& row) const {
  ResultRow r = row;
  if (without_config_key_) r.set("config_key", std::string());
  const std::string k = r.key();
  for (auto& e : existing_keys_)
    if (e == k) return true;
  return false;
}

void CsvAppender::append(const ResultRow& row) {
  for (const std::string& c : absent_late_)
    for (const auto& l : late_columns())
      SPB_USAGE(l.first != c || row.get(c).empty() || row.get(c) == l.second,
                "--csv " + path_ + ": the file was written before the `" + c + "` column and holds " + l.second +
                    " rows alone; write " + c + " " + row.get(c) + " rows to a new file");
  std::vector<std::string> cells;
  for (auto& c : columns_) cells.push_back(row.get(c));
  append_whole("--csv", path_, join(cells) + "\n");
  ResultRow r = row;
  if (without_config_key_) r.set("config_key", std::string());
  existing_keys_.push_back(r.key());
}

}  // namespace spb
