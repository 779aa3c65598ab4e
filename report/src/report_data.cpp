#include "report/src/report_data.h"

#include <fnmatch.h>

#include <libfccp/csv.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <tuple>
#include <utility>

#include "model/gla_model.h"
#include "runtime/csv.h"
#include "runtime/error.h"

namespace spb {

namespace fs = std::filesystem;

const std::string& col(const Row& r, const std::string& c) {
  static const std::string empty;
  auto it = r.find(c);
  return it == r.end() ? empty : it->second;
}

double num(const Row& r, const std::string& c) {
  const std::string& s = col(r, c);
  if (s.empty()) return NAN;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  return end && *end == '\0' ? v : NAN;
}

long long lnum(const Row& r, const std::string& c) {
  const double v = num(r, c);
  return std::isfinite(v) && std::fabs(v) < 9e18 ? (long long)std::llround(v) : 0;
}

bool is_cpu_row(const Row& r) { return col(r, "backend") == "cpu"; }

std::string timing_of(const Row& r) {
  const std::string& t = col(r, "timing");
  return t.empty() && col(r, "level") == "collective" ? kBackToBack : t;
}

std::string timing_words(const std::string& timing) { return timing == kBackToBack ? "back-to-back" : timing; }

const std::string& ResultFiles::file_of(const Row& r) const {
  static const std::string none;
  const std::less<const Row*> before;
  for (auto [v, f] : {std::pair{&rows, &row_file}, {&node_rows, &node_row_file}, {&baseline_rows, &baseline_row_file},
                      {&sim_rows, &sim_row_file}, {&gdn_rows, &gdn_row_file}})
    if (!v->empty() && !before(&r, v->data()) && before(&r, v->data() + v->size())) return (*f)[size_t(&r - v->data())];
  return none;
}

// --- whether a row is of the current code -----------------------------------------------------------------------------

const std::vector<MeasuredPaths>& measured_paths() {
  static const std::vector<std::string> comm = {"zeco/", "baselines/pattern_*", "runtime/communicator*",
                                                "runtime/device*"};
  // baselines/* is the SP methods' and patterns' files, not baselines/pytorch/ (another framework's baseline).
  static const std::vector<std::string> op = {"kernels/", "sp/", "zeco/", "baselines/*", "runtime/communicator*",
                                              "runtime/device*"};
  static const std::vector<MeasuredPaths> table = [] {
    std::vector<std::string> model = op;
    model.push_back("model/");
    // A stage row times the kernels one method calls, between the recorder's events.
    std::vector<std::string> stage = op;
    stage.insert(stage.end(), {"sim/stage_table*", "backend/"});  // the recorders, and where the level wires them
    // A model stage row times the model's kernels too, and is recorded by both recorders.
    std::vector<std::string> model_stage = model;
    model_stage.insert(model_stage.end(), {"sim/model_stage_table*", "sim/stage_table*", "backend/"});
    // CPU ranks run the CPU kernels over MPI, and the simulated build the simulation's: none of the CUDA kernels, the
    // GPU device or NCCL.
    auto without_gpu_code = [](std::vector<std::string> v) {
      v.insert(v.end(), {"!kernels/cuda/", "!kernels/gla/cuda/", "!kernels/gla/bench/", "!kernels/gdn/cuda/",
                         "!model/cuda/", "!zeco/all_scan_device*", "!runtime/device_cuda*",
                         "!runtime/communicator_nccl*"});
      return v;
    };
    // A simulated row runs its level's code in the simulation (sim/, its platforms under sim/platforms/); the
    // collective and operator levels run none of the model's simulated kernels (sim/*model*), as their measured rows
    // run none of model/.
    auto with_sim = [&](std::vector<std::string> v) {
      v.insert(v.end(), {"sim/", "!sim/*model*", "backend/"});
      return without_gpu_code(v);
    };
    // A simulated model row runs the model and every part of the simulation, its model kernels among them.
    std::vector<std::string> sim_model = model;
    sim_model.insert(sim_model.end(), {"sim/", "backend/"});
    sim_model = without_gpu_code(sim_model);
    // A GLA row runs none of Gated DeltaNet's kernels, local stages or simulated stages; a GDN row (`attention` gdn,
    // a level + kGdnLevelSuffix) runs GLA's copy stages beside its own, so it keeps every path.
    auto gla = [](std::vector<std::string> v) {
      v.insert(v.end(), {"!kernels/gdn/", "!sp/sp_local_gdn*", "!sim/*gdn*"});
      return v;
    };
    return std::vector<MeasuredPaths>{
        // A kernel row times its family's kernels alone (GLA's, or Gated DeltaNet's: method gdn).
        {"kernel", {"kernels/gla/", "kernels/cuda/"}}, {kGdnKernelLevel, {"kernels/gdn/", "kernels/cuda/"}},
        {"collective", comm}, {"operator", gla(op)}, {"timeline", gla(op)}, {"model", gla(model)},
        {"collective" + kCpuLevelSuffix, without_gpu_code(comm)},
        {"operator" + kCpuLevelSuffix, gla(without_gpu_code(op))},
        {"model" + kCpuLevelSuffix, gla(without_gpu_code(model))},
        {"stage", gla(stage)}, {kModelStageLevel, gla(model_stage)},
        {kSimLevelPrefix + "collective", with_sim(comm)}, {kSimLevelPrefix + "operator", gla(with_sim(op))},
        {kSimLevelPrefix + "model", gla(sim_model)},
        {"operator" + kGdnLevelSuffix, op}, {"operator" + kCpuLevelSuffix + kGdnLevelSuffix, without_gpu_code(op)},
        {"stage" + kGdnLevelSuffix, stage}, {kSimLevelPrefix + "operator" + kGdnLevelSuffix, with_sim(op)},
        {kPytorchModelLevel, {"baselines/pytorch/fla_baseline.py", "baselines/pytorch/run_beside_spbench.sh"}},
        {kPytorchKernelLevel, {"baselines/pytorch/fla_gdn_kernel.py"}}};
  }();
  return table;
}

const std::vector<std::string>& measured_paths_of(const std::string& level) {
  static const std::vector<std::string> none;
  for (const auto& m : measured_paths())
    if (m.level == level) return m.paths;
  return none;
}

bool is_simulated(const Row& r) { return col(r, "simulated") == "1"; }

namespace {

std::string family_level_of(const Row& r) {
  if (col(r, "backend") == "pytorch") return kPytorchModelLevel;
  if (level_of(r) == "kernel" && col(r, "backend") == "triton") return kPytorchKernelLevel;
  if (level_of(r) == "kernel" && col(r, "method") == "gdn") return kGdnKernelLevel;
  if (level_of(r) == "stage" && !col(r, "layers").empty()) return kModelStageLevel;
  if (is_simulated(r)) return kSimLevelPrefix + level_of(r);
  if (is_cpu_row(r) && !measured_paths_of(level_of(r) + kCpuLevelSuffix).empty()) return level_of(r) + kCpuLevelSuffix;
  return level_of(r);
}

}  // namespace

std::string code_level_of(const Row& r) {
  const std::string level = family_level_of(r);
  const std::string gdn = level + kGdnLevelSuffix;
  return col(r, "attention") == "gdn" && !measured_paths_of(gdn).empty() ? gdn : level;
}

std::string level_of(const Row& r) {
  const std::string& l = col(r, "level");
  return l.empty() && r.count("stream") && r.count("span") ? "timeline" : l;
}

namespace {

std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `cmd` (stderr discarded); its stdout lines, and whether it exited 0.
std::pair<bool, std::vector<std::string>> run_lines(const std::string& cmd) {
  std::vector<std::string> lines;
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return {false, lines};
  std::string cur;
  for (int ch; (ch = std::fgetc(p)) != EOF;) {
    if (ch == '\n') lines.push_back(cur), cur.clear();
    else cur += char(ch);
  }
  if (!cur.empty()) lines.push_back(cur);
  const int rc = pclose(p);
  return {rc == 0, lines};
}

bool hex_sha(const std::string& s) {
  if (s.size() < 7 || s.size() > 40) return false;
  for (char c : s)
    if (!std::isxdigit((unsigned char)c)) return false;
  return true;
}

// A changed file's pathspec: a directory ("kernels/") by prefix, a glob ("runtime/device*") by fnmatch.
bool matches(const std::string& spec, const std::string& file) {
  if (!spec.empty() && spec.back() == '/') return file.rfind(spec, 0) == 0;
  return fnmatch(spec.c_str(), file.c_str(), FNM_PATHNAME) == 0;  // as git's glob: * stops at a /
}

}  // namespace

std::vector<std::string> files_changed_in_code(const std::vector<std::string>& diff) {
  std::vector<std::string> out;
  std::string file;
  bool counts = false;
  auto flush = [&] {
    if (!file.empty() && counts) out.push_back(file);
    file.clear(), counts = false;
  };
  auto changes_no_code = [](const std::string& line) {  // an #include, a line comment, blank
    size_t i = 1;
    while (i < line.size() && std::isspace((unsigned char)line[i])) ++i;
    if (i == line.size()) return true;                  // a blank line
    if (line.compare(i, 2, "//") == 0) return true;    // a comment alone (a moved file's path in it)
    if (line[i] != '#') return false;
    ++i;
    while (i < line.size() && std::isspace((unsigned char)line[i])) ++i;
    return line.compare(i, 7, "include") == 0;
  };
  for (const std::string& line : diff) {
    if (line.rfind("diff --git ", 0) == 0) {
      flush();
      const auto b = line.rfind(" b/");
      file = b == std::string::npos ? line : line.substr(b + 3);
    } else if (line.rfind("Binary files ", 0) == 0) {
      counts = true;
    } else if (line.rfind("+++ ", 0) == 0 || line.rfind("--- ", 0) == 0) {
      continue;
    } else if ((line[0] == '+' || line[0] == '-') && !changes_no_code(line)) {
      counts = true;
    }
  }
  flush();
  return out;
}

const CodeState& CodeStates::of(const Row& r) { return of(col(r, "git_sha"), code_level_of(r)); }

const CodeState& CodeStates::of(const std::string& git_sha, const std::string& level) {
  auto [it, fresh] = cache_.try_emplace({git_sha, level});
  CodeState& st = it->second;
  if (!fresh) return st;
  st.level = level;
  st.sha = git_sha;
  const std::string dirty = "-dirty";
  if (st.sha.size() > dirty.size() && st.sha.compare(st.sha.size() - dirty.size(), dirty.size(), dirty) == 0) {
    st.sha.resize(st.sha.size() - dirty.size());
    st.dirty = true;
  }
  const auto& paths = measured_paths_of(level);
  if (paths.empty()) {
    st.why = "no source paths listed for level '" + level + "'";
    return st;
  }
  if (!hex_sha(st.sha)) {
    st.why = st.sha.empty() ? "no git_sha" : "git_sha '" + st.sha + "' is not a commit id";
    return st;
  }
  const std::string git = "git -C " + shell_quoted(dir_);
  if (!run_lines(git + " cat-file -e " + st.sha + "^{commit}").first) {
    st.why = "commit " + st.short_sha() + " is not in this repository (or no git)";
    return st;
  }
  // Files added since the row's commit are left out: the row's code did not hold them (a new pattern or method is
  // code of rows to come); a change that makes old code use one changes an old file too. Renames are found (-M): a
  // file moved whole, or moved with only its #include lines changed, is the same code (files_changed_in_code).
  std::string cmd = git + " diff -M -U0 --no-color --diff-filter=a " + st.sha + " HEAD --";
  for (const auto& p : paths) {  // "!spec": a path that does not count, though an earlier spec holds it
    const bool exclude = p[0] == '!';
    const std::string spec = exclude ? p.substr(1) : p;
    cmd += " " + shell_quoted((exclude ? ":(top,exclude,glob)" : ":(top,glob)") +
                              (spec.back() == '/' ? spec + "**" : spec));
  }
  cmd += " " + shell_quoted(":(top,exclude,glob)**/*.md");  // the folders' notes describe the code, they aren't it
  auto [ok, diff] = run_lines(cmd);
  if (!ok) {
    st.why = "git diff " + st.short_sha() + " HEAD failed";
    return st;
  }
  const std::vector<std::string> files = files_changed_in_code(diff);
  st.kind = files.empty() ? CodeState::current : CodeState::changed;
  for (const auto& p : paths) {
    if (p[0] == '!') continue;
    const auto n = std::count_if(files.begin(), files.end(), [&](const std::string& f) { return matches(p, f); });
    if (n) st.changed_paths.push_back(p + " (" + std::to_string(n) + (n == 1 ? " file)" : " files)"));
  }
  return st;
}

bool code_changed(const Row& r) { return col(r, kCodeStateCol) == "changed"; }
bool code_unknown(const Row& r) { return col(r, kCodeStateCol) == "unknown"; }
std::string code_state_mark(const std::string& code_state) {
  return code_state == "changed" ? " †" : code_state == "unknown" ? " ?" : "";
}
std::string stale_mark(const Row& r) { return code_state_mark(col(r, kCodeStateCol)); }

void ResultFiles::mark_code(CodeStates& states) {
  for (auto* v : {&rows, &node_rows, &baseline_rows, &sim_rows, &gdn_rows, &timeline})
    for (Row& r : *v) {
      const CodeState& st = states.of(r);
      r[kCodeStateCol] = st.kind == CodeState::current ? "current" : st.kind == CodeState::changed ? "changed" : "unknown";
      std::string paths;
      for (const auto& p : st.changed_paths) paths += (paths.empty() ? "" : "; ") + p;
      r["code_changed"] = paths;
    }
}

bool is_gdn_row(const Row& r) {
  if (col(r, "attention") == "gdn") return true;
  return col(r, "level") == "kernel" && (col(r, "method") == "gdn" || col(r, "method") == "fla-gdn");
}

ResultFiles load_results(const std::string& dir) {
  std::error_code ec;
  SPB_USAGE(fs::is_directory(dir, ec), "--results " + dir + ": not a directory");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".csv") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());  // the order rows are read in, so ties between rows resolve the same way
  // The simulation's rows (results/sim/*.csv), after the measured files, named "sim/NAME.csv".
  std::vector<std::string> sim_names;
  if (fs::is_directory(dir + "/sim", ec))
    for (const auto& e : fs::directory_iterator(dir + "/sim"))
      if (e.is_regular_file() && e.path().extension() == ".csv")
        sim_names.push_back("sim/" + e.path().filename().string());
  std::sort(sim_names.begin(), sim_names.end());
  names.insert(names.end(), sim_names.begin(), sim_names.end());
  ResultFiles out;
  for (const std::string& name : names) {
    auto rows = read_csv(dir + "/" + name);
    const bool timeline = name.find("timeline") != std::string::npos;
    if (timeline) {
      const bool ok = rows.empty() || (rows[0].count("rank") && rows[0].count("stream") && rows[0].count("span") &&
                                       rows[0].count("start_us") && rows[0].count("end_us"));
      if (!ok) {
        out.skipped.push_back({name, "a timeline CSV needs the columns rank, stream, span, start_us, end_us"});
        continue;
      }
      out.timeline_files.push_back({name, rows.size()});
      out.file_rows.push_back({name, rows});
      for (auto& r : rows)
        if (lnum(r, "rank") >= 0 && lnum(r, "rank") < 4096 && std::isfinite(num(r, "start_us")) &&
            std::isfinite(num(r, "end_us")))
          out.timeline.push_back(std::move(r));
      continue;
    }
    if (!rows.empty() && !(rows[0].count("level") && rows[0].count("method") && rows[0].count("time_ms_mean"))) {
      out.skipped.push_back({name, "not a results CSV (no level, method or time_ms_mean column)"});
      continue;
    }
    const bool sim_file = name.rfind("sim/", 0) == 0;
    if (sim_file) {  // simulated rows: kept apart from every measured row (ResultFiles::sim_rows)
      out.file_rows.push_back({name, rows});
      size_t bad = 0;
      for (auto& r : rows) {
        if (col(r, "level").empty() || col(r, "method").empty() || lnum(r, "world_size") < 1 || !is_simulated(r)) {
          ++bad;
          continue;
        }
        if (is_gdn_row(r)) {
          out.gdn_rows.push_back(std::move(r));
          out.gdn_row_file.push_back(name);
          continue;
        }
        out.sim_rows.push_back(std::move(r));
        out.sim_row_file.push_back(name);
      }
      if (bad)
        out.skipped.push_back({name, std::to_string(bad) + " rows without a level, method, world size or simulated"});
      continue;
    }
    out.files.push_back({name, rows.size()});
    out.file_rows.push_back({name, rows});
    size_t bad = 0, grouped = 0;
    for (auto& r : rows) {
      // A row the tables cannot place: no level or method, or no world size.
      if (col(r, "level").empty() || col(r, "method").empty() || lnum(r, "world_size") < 1) {
        ++bad;
        continue;
      }
      // Collective rows timed with an event per group of calls (--calls-per-event) measure without the per-call
      // event; the tables compare calls timed one event each, so they stay in the CSV but out of the tables.
      if (timing_of(r).rfind("back_to_back_per", 0) == 0) {
        ++grouped;
        continue;
      }
      if (is_gdn_row(r)) {  // the other family (ResultFiles::gdn_rows)
        out.gdn_rows.push_back(std::move(r));
        out.gdn_row_file.push_back(name);
        continue;
      }
      if (col(r, "backend") == "pytorch") {  // another framework's baseline: no SP method (ResultFiles)
        out.baseline_rows.push_back(std::move(r));
        out.baseline_row_file.push_back(name);
        continue;
      }
      const bool several_nodes = num(r, "nodes") > 1;
      (several_nodes ? out.node_rows : out.rows).push_back(std::move(r));
      (several_nodes ? out.node_row_file : out.row_file).push_back(name);
    }
    if (bad) out.skipped.push_back({name, std::to_string(bad) + " rows without a level, method or world size"});
    if (grouped) out.skipped.push_back({name, std::to_string(grouped) + " rows timed per group of calls (left out)"});
  }
  return out;
}

std::vector<PaperValue> load_paper(const std::string& path) {
  std::vector<PaperValue> out;
  try {
    io::CSVReader<9> in(path);
    in.read_header(io::ignore_extra_column, "table", "level", "gpus", "seq_per_gpu", "method", "metric", "value", "unit",
                   "source");
    PaperValue v;
    while (in.read_row(v.table, v.level, v.gpus, v.seq_per_gpu, v.method, v.metric, v.value, v.unit, v.source))
      out.push_back(v);
  } catch (const io::error::base& e) {
    throw UsageError("--paper " + path + ": " + e.what());
  }
  return out;
}

double paper_value(const std::vector<PaperValue>& paper, const std::string& level, int gpus, long long seq,
                   const std::string& method) {
  for (const auto& v : paper)
    if (v.level == level && v.gpus == gpus && v.seq_per_gpu == seq && v.method == method) return v.value;
  return NAN;
}

namespace {

bool model_row(const Row& r, long long L, bool cpu) {
  return col(r, "level") == "model" && is_cpu_row(r) == cpu && lnum(r, "tokens_per_rank") == L &&
         num(r, "tokens_per_s_per_gpu") > 0 && (col(r, "pass").empty() || col(r, "pass") == "step") &&
         default_order(r);
}

// `b` is preferred over `a`: the paper's configuration first, then the newer date (the later row on a tie).
bool model_row_better(const Row& a, const Row& b) {
  const bool pa = paper_model_config(a), pb = paper_model_config(b);
  if (pa != pb) return pb;
  return col(a, "date") <= col(b, "date");
}

}  // namespace

std::string schedule_of(const Row& r) {
  std::string s;
  auto flag = [&](bool on, const std::string& f) { if (on) s += (s.empty() ? "" : " ") + f; };
  flag(lnum(r, "overlap") != 0, "--overlap " + col(r, "overlap"));
  flag(lnum(r, "head_groups") > 1, "--head-groups " + col(r, "head_groups"));
  if (col(r, "level") == "model") {  // the gradient sum's default depends on the machine and the other flags
    const bool by_default = grad_overlap_by_default(!is_cpu_row(r), int(lnum(r, "world_size")),
                                                    lnum(r, "shard_optimizer") != 0, int(lnum(r, "overlap")));
    const bool on = lnum(r, "grad_overlap") != 0;
    flag(on != by_default, on ? "--grad-overlap" : "--no-grad-overlap");
  }
  flag(lnum(r, "shard_optimizer") != 0, "--shard-optimizer");
  flag(lnum(r, "wgrad_beside") != 0, "--wgrad-beside");
  return s.empty() ? "default" : s;
}

bool default_order(const Row& r) { return schedule_of(r) == "default"; }

bool paper_model_config(const Row& r) {
  return lnum(r, "heads") == 32 && lnum(r, "hidden") == 2048 && lnum(r, "layers") == 20;
}

std::string model_config_key(const Row& r) {
  std::string k;
  for (const char* c : {"batch", "heads", "dk", "dv", "hidden", "layers", "vocab", "expand_k", "expand_v", "mlp",
                        "dtype", "recompute"})
    k += col(r, c) + "|";
  return k;
}

std::string model_config_str(const Row& r) {
  const std::string& rc = col(r, "recompute");
  return "H=" + col(r, "heads") + " (dk " + col(r, "dk") + ", dv " + col(r, "dv") + "), hidden " + col(r, "hidden") +
         ", " + col(r, "layers") + " layers, vocab " + col(r, "vocab") + ", mlp " + col(r, "mlp") + ", B=" +
         col(r, "batch") + ", " + col(r, "dtype") + (rc.empty() || rc == "none" ? "" : ", recompute " + rc);
}

std::vector<const Row*> model_rows_shown(const std::vector<Row>& rows, long long L, bool cpu) {
  std::map<std::string, const Row*> best;
  for (const Row& r : rows) {
    if (!model_row(r, L, cpu)) continue;
    const Row*& slot =
        best[col(r, "method") + "|" + col(r, "world_size") + "|" + col(r, "gpu") + "|" + col(r, "backend")];
    if (!slot || model_row_better(*slot, r)) slot = &r;
  }
  std::vector<const Row*> out;
  for (auto& [k, r] : best) out.push_back(r);
  return out;
}

const Row* model_dp_row(const std::vector<Row>& rows, const Row& r) {
  const Row* same_code = nullptr;
  const Row* newest = nullptr;
  const std::string config = model_config_key(r);
  for (const Row& d : rows) {
    if (col(d, "method") != "dp" || !model_row(d, lnum(r, "tokens_per_rank"), is_cpu_row(r)) ||
        col(d, "gpu") != col(r, "gpu") || lnum(d, "world_size") != lnum(r, "world_size") ||
        model_config_key(d) != config)
      continue;
    if (!newest || col(*newest, "date") <= col(d, "date")) newest = &d;
    if (col(d, "git_sha") == col(r, "git_sha") && (!same_code || col(*same_code, "date") <= col(d, "date")))
      same_code = &d;
  }
  return same_code ? same_code : newest;
}

}  // namespace spb
