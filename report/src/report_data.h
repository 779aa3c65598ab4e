// spbench report, its inputs: the result rows of results/*.csv and results/sim/*.csv, the overlap timelines
// (results/*timeline*.csv) and the paper's published numbers.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace spb {

using Row = std::map<std::string, std::string>;

// A column's value ("" when absent) and as a number (NaN when absent, empty or not a number).
const std::string& col(const Row& r, const std::string& c);
double num(const Row& r, const std::string& c);
// Integers: 0 when absent or not a number (a NaN never reaches an integer conversion).
long long lnum(const Row& r, const std::string& c);
inline int inum(const Row& r, const std::string& c) { return int(lnum(r, c)); }
// CPU ranks: not comparable with the paper's GPUs.
bool is_cpu_row(const Row& r);
// A collective row's timing (`spbench collective --timing`, harness/NOTES.md): kLatency (each call alone after a
// barrier, the paper's Table 2), kBackToBack (calls enqueued one after another: a throughput), back_to_back_perG
// (an event per G calls), probe (a link probe). A collective row without the column, or with it empty, was written
// before there was a choice and was timed back to back. Other levels' rows: their column as it is ("" for none).
inline const std::string kLatency = "latency";
inline const std::string kBackToBack = "back_to_back";
std::string timing_of(const Row& r);
// "latency" or "back-to-back" (the flag's spelling), for the report's words; other timings as they are.
std::string timing_words(const std::string& timing);

// --- whether a row is of the current code -----------------------------------------------------------------------------
// The source paths each level's numbers depend on (git pathspecs, relative to the repository's root): a row is of the
// current code when none of them changed between its commit (`git_sha`) and HEAD. Left out on purpose: the harness's
// option parsing and CSV writing (harness/, runtime/csv*, runtime/error*, cli/, report/), which change often and time
// nothing, so that a fix there does not mark every row; a change there that moves a timing (where the timer starts,
// what a warm-up does) needs its path listed here.
//   kernel      kernels/
//   collective  zeco/, baselines/pattern_*, runtime/communicator*, runtime/device*
//   operator    kernels/, sp/, zeco/, baselines/* (not baselines/pytorch/), runtime/communicator*, runtime/device*
//               (timeline: the same)
//   model       the operator's, and model/
//   model-pytorch  baselines/pytorch/fla_baseline.py and run_beside_spbench.sh: the PyTorch + fla baseline's rows
//               (backend pytorch), which run no spbench code and none of the folder's other scripts
//   stage       the operator's, and sim/stage_table*
//   model-stage a stage row of the model level (`spbench model --stage-times`; its rows carry the model's columns,
//               `layers` among them): the model's paths, sim/model_stage_table* and sim/stage_table*
//   sim-collective, sim-operator, sim-model  a simulated row (results/sim/): its level's paths and sim/ (the
//               simulation and its platforms)
//   <level>-gdn a row of Gated DeltaNet (`attention` gdn) at the operator or stage level, measured or simulated: the
//               level's paths; the GLA lists leave out kernels/gdn/, sp/sp_local_gdn* and sim/*gdn*
struct MeasuredPaths {
  std::string level;
  std::vector<std::string> paths;
};
const std::vector<MeasuredPaths>& measured_paths();
const std::vector<std::string>& measured_paths_of(const std::string& level);  // empty for an unknown level

// A row's code against HEAD. `current`: none of its level's paths changed since its commit; `changed`: some did
// (`changed_paths` lists them, grouped by pathspec: "kernels/ (12 files)"); `unknown`: no commit, a commit not in the
// repository, or no git.
struct CodeState {
  enum Kind { current, changed, unknown } kind = unknown;
  std::string sha;    // the row's git_sha without its -dirty suffix
  bool dirty = false;  // the row's tree had uncommitted changes (-dirty)
  std::string level;
  std::vector<std::string> changed_paths;
  std::string why;  // unknown: why
  std::string short_sha() const { return sha.substr(0, 7); }
};
// The files the lines of a `git diff -M -U0` change in what they do: their new paths, leaving out pure renames and
// files whose every changed line is an #include (a move updates the includes of the files that name it), a line
// comment alone (a path it cites) or blank.
std::vector<std::string> files_changed_in_code(const std::vector<std::string>& diff);
// Answers per (sha, level), asking git once each (`git diff -M SHA HEAD -- PATHS` in the repository that holds `dir`;
// files moved whole or with only their #include lines changed do not count).
class CodeStates {
 public:
  explicit CodeStates(std::string dir) : dir_(std::move(dir)) {}
  const CodeState& of(const std::string& git_sha, const std::string& level);
  const CodeState& of(const Row& r);
  const std::map<std::pair<std::string, std::string>, CodeState>& all() const { return cache_; }

 private:
  std::string dir_;
  std::map<std::pair<std::string, std::string>, CodeState> cache_;
};
// A row's level: its `level`, "timeline" for a timeline row.
std::string level_of(const Row& r);
// The level whose measured paths judge a row's code state: level_of, but kPytorchModelLevel for a row of the PyTorch
// + fla baseline, kPytorchKernelLevel for a kernel row of fla's (backend triton), kGdnKernelLevel for a kernel row of
// spbench's Gated DeltaNet (method gdn), kModelStageLevel for a stage row of the model level (one with a `layers` value), and
// kSimLevelPrefix + level_of for a simulated row (`simulated` = 1: its level's paths and sim/), and level_of +
// kCpuLevelSuffix for a measured row of CPU ranks (`backend` cpu: its level's paths but the GPU code, which such a
// row never runs); any of these + kGdnLevelSuffix for a row of Gated DeltaNet (`attention` gdn) where the level has
// such a list (a GLA row's lists leave out GDN's kernels and stages, which it never runs).
inline const std::string kPytorchModelLevel = "model-pytorch";
inline const std::string kPytorchKernelLevel = "kernel-pytorch";
inline const std::string kGdnKernelLevel = "kernel-gdn";
inline const std::string kCpuLevelSuffix = "-cpu";
inline const std::string kGdnLevelSuffix = "-gdn";
inline const std::string kModelStageLevel = "model-stage";
inline const std::string kSimLevelPrefix = "sim-";
bool is_simulated(const Row& r);
std::string code_level_of(const Row& r);
// The columns every row gets from the report (never from a results file): code_state (current, changed, unknown)
// and code_changed (the changed paths, "; "-separated).
constexpr const char* kCodeStateCol = "code_state";
bool code_changed(const Row& r);   // code_state is "changed"
bool code_unknown(const Row& r);   // code_state is "unknown"
// " †" for a row of changed code, " ?" for one of unknown code, "" otherwise: the mark beside a measured number.
std::string stale_mark(const Row& r);
// The same mark for a `code_state` value (current, changed, unknown), where only that value is kept.
std::string code_state_mark(const std::string& code_state);

struct ResultFiles {
  std::vector<Row> rows;                         // every result row, files in name order, rows in file order
  std::vector<Row> timeline;                     // rows of results/*timeline*.csv
  std::vector<std::pair<std::string, size_t>> files, timeline_files;  // basename, rows
  std::vector<std::pair<std::string, std::string>> skipped;          // basename, why
  std::vector<std::string> row_file;  // rows[i] came from results/row_file[i] (a basename)
  // Rows of runs over several nodes (nodes > 1: `--ranks-per-node` below the world size, simulated on one host or
  // not), apart from `rows`, so that the tables and fits of one node never mix them in; the network's fit and the
  // section on simulated nodes read them.
  std::vector<Row> node_rows;
  std::vector<std::string> node_row_file;
  // Rows of other frameworks' baselines (backend `pytorch`: PyTorch + fla), apart from `rows`: they are not an SP
  // method and no method table shows them; the model level compares spbench's dp with them.
  std::vector<Row> baseline_rows;
  std::vector<std::string> baseline_row_file;
  // Rows of the simulation (results/sim/*.csv, `simulated` = 1, each with its SimGrid `platform`), apart from every
  // measured row: no table, fit or plot of measured rows mixes them in; the simulation's section (report_sim.cpp)
  // reads them. sim_row_file[i] is "sim/NAME.csv".
  std::vector<Row> sim_rows;
  std::vector<std::string> sim_row_file;
  // Rows of Gated DeltaNet (is_gdn_row: measured and simulated, spbench's and fla's kernels), apart from every other:
  // the paper's tables are GLA's; the Gated DeltaNet section (report_gdn.cpp) reads them.
  std::vector<Row> gdn_rows;
  std::vector<std::string> gdn_row_file;
  // Every results file as read: its name and rows (timeline files included), for the index of results/.
  std::vector<std::pair<std::string, std::vector<Row>>> file_rows;
  // Sets code_state/code_changed on every row (rows, node_rows, baseline_rows, sim_rows, gdn_rows, timeline) through
  // `states`.
  void mark_code(CodeStates& states);
  // The basename of the file a row of `rows`, `node_rows`, `baseline_rows`, `sim_rows` or `gdn_rows` came from (""
  // for none).
  const std::string& file_of(const Row& r) const;
};
// A row of the Gated DeltaNet family: `attention` gdn, or a kernel row of its kernels (method gdn, or fla's fla-gdn).
bool is_gdn_row(const Row& r);
// Reads every *.csv of `dir`, and of `dir`/sim (the simulated rows, ResultFiles::sim_rows) where it exists (a
// UsageError if `dir` is not a directory or a file is malformed).
ResultFiles load_results(const std::string& dir);

struct PaperValue {
  std::string table, level;
  int gpus = 0;
  long long seq_per_gpu = 0;
  std::string method, metric;
  double value = 0;
  std::string unit, source;
};
// paper_tables.csv through libfccp's CSVReader<9> (a UsageError if it cannot be read).
std::vector<PaperValue> load_paper(const std::string& path);
// The paper's value or NaN ("not published here").
double paper_value(const std::vector<PaperValue>& paper, const std::string& level, int gpus, long long seq,
                   const std::string& method);

// Of the rows that pass `keep`, the newest (by `date`; a later file or row wins a tie) per key(row).
template <class Keep, class Key>
std::map<std::string, const Row*> newest_by(const std::vector<Row>& rows, Keep keep, Key key) {
  std::map<std::string, const Row*> out;
  for (const Row& r : rows) {
    if (!keep(r)) continue;
    const Row*& slot = out[key(r)];
    if (!slot || col(*slot, "date") <= col(r, "date")) slot = &r;
  }
  return out;
}

// The methods' default schedule: zeco and lasp2 in order (--overlap 0), zeco's one head group and, at the model
// level, one gradient all-reduce after the backward and AdamW on every rank (no --grad-overlap, no
// --shard-optimizer). Rows of the other orders (and groups) are development
// measurements beside it: the tables and plots show one row per method, the default's, and the
// exposed-communication section shows each order's timeline.
bool default_order(const Row& r);
// "default", or the flags that set the row's schedule apart from it (--overlap N, --head-groups N, --grad-overlap,
// --shard-optimizer).
std::string schedule_of(const Row& r);

// --- the model level (Tables 5 and 6) ---
// A model row at the paper's configuration: H = 32 heads, hidden 2048, 20 layers.
bool paper_model_config(const Row& r);
// What a model row's throughput depends on besides its method, world size, machine and code: batch, heads, dk, dv,
// hidden, layers, vocab, expand_k, expand_v, mlp, dtype, recompute (a key, and the same in words).
std::string model_config_key(const Row& r);
std::string model_config_str(const Row& r);
// The model rows a table shows at `tokens_per_rank` (CPU ranks or not): one per (method, world size, gpu, backend),
// a row at the paper's configuration where the group has one, and of those the newest (by date; a later file or row
// wins a tie).
std::vector<const Row*> model_rows_shown(const std::vector<Row>& rows, long long tokens_per_rank, bool cpu);
// The dp row that `r`'s share of dp compares with: the same gpu, world size, tokens per rank and configuration; of
// the same code (git_sha) where there is one, else the newest. nullptr when dp was not measured there.
const Row* model_dp_row(const std::vector<Row>& rows, const Row& r);

}  // namespace spb
