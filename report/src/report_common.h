// spbench report, what its sections share: the paper's settings, the run's context, a paper table's definition and
// lines, the formatting helpers, and every section's entry point. Internal to the generator (report*.cpp); the
// command itself is report.h's.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "report/src/report.h"
#include "report/src/report_data.h"
#include "report/src/report_plot.h"

namespace spb {
namespace report_detail {

// --- the paper's settings -------------------------------------------------------------------------------------------
constexpr double kTable2Bytes = 2097152;    // 32 heads x 128 x 128 fp32 per rank
constexpr long long kPaperBlockElems = 16384;  // All-Scan block of the paper
constexpr long long kTable2Seq = 8192;
inline const std::vector<int> kPaperGpus = {8, 16, 32, 64, 128, 256};  // the GPU counts of the paper's tables
inline const char* const kNotMeasured = "not measured";
inline const char* const kNotPublished = "not published here";

// --- one paper table: measured and paper per (GPUs, method) ---------------------------------------------------------
struct TableDef {
  std::string id, what;
  std::string ref;  // ratios are method / ref
  std::string paper_level;
  long long paper_seq = 0;
  std::vector<std::string> methods;
  std::function<bool(const Row&)> setting;  // a non-CPU row at the paper's setting (method and world size free)
  bool cpu = false;  // CPU-rank rows, at the measured world sizes only
  // The heading of the simulation's prediction of this table for the GPU counts not measured (section_simulation,
  // beside the paper), named under the table where simulated rows exist; "" for none.
  std::string predicted_in;
};

struct Line {
  int gpus = 0;
  std::string method;
  const Row* row = nullptr;
  double measured = NAN, paper = NAN;
  double r_measured = NAN, r_paper = NAN;
};

struct Context {
  const ReportOptions& o;
  ResultFiles res;
  std::vector<PaperValue> paper;
  std::string plots_dir, tables_dir;
  std::vector<std::string> plots;  // written
  // Each (git_sha, level) of the rows against HEAD (report_data.h CodeStates), for the section on older code.
  std::map<std::pair<std::string, std::string>, CodeState> code_states;
};

struct Figure {
  std::string name, caption, missing;  // missing: why it was not drawn
};

// Operator configurations (shape) present among `cpu` rows: batch, heads, dk, dv, dtype.
struct Shape {
  int batch, heads, dk, dv;
  std::string dtype;
  bool operator<(const Shape& o) const {
    return std::tie(batch, heads, dk, dv, dtype) < std::tie(o.batch, o.heads, o.dk, o.dv, o.dtype);
  }
  std::string str() const {
    return "B=" + std::to_string(batch) + ", H=" + std::to_string(heads) + ", dk=" + std::to_string(dk) +
           ", dv=" + std::to_string(dv) + ", " + dtype;
  }
  std::string tag() const {
    return "B" + std::to_string(batch) + "_H" + std::to_string(heads) + "_dk" + std::to_string(dk) + "_dv" +
           std::to_string(dv);
  }
};

// --- formatting -----------------------------------------------------------------------------------------------------
std::string fmt(const char* f, double v);
std::string num_cell(double v);
std::string ratio_cell(double v);
std::string int_str(double v);
std::string bytes_str(double b);
// `align`: one letter per column, l or r (numbers); missing letters are l.
std::string md_table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
                     const std::string& align = "");
std::string csv_field(std::string s);
std::string join(const std::vector<std::string>& v, const std::string& sep);

// --- rows -----------------------------------------------------------------------------------------------------------
bool is(const Row& r, const char* c, double v);
double ms(const Row& r);
double tokens_per_s(const Row& r);
std::string machine_of(const Row& r);
// A plot's series of `method` measured from row `r` (its backend, then `extra` and the gpu where it differs from
// the backend). add_series keeps one series per title, in the tables' order of methods.
PlotSeries measured_of(const std::string& method, const Row& r, const std::string& extra = "", int colour = -1);
PlotSeries& add_series(std::map<std::string, PlotSeries>& series, const std::vector<std::string>& order,
                       PlotSeries fresh);
// Methods in the order of the paper's tables, then any other, alphabetically: a new method shows up by itself.
std::vector<std::string> ordered(const std::set<std::string>& names, const std::vector<std::string>& first);
// The operator-level methods (the registered ones and any measured) and the collective patterns (the
// paper's two and LASP-1's chain, then every pattern measured on GPUs, or on CPU ranks for `cpu`), in table order.
std::vector<std::string> operator_methods(const Context& c);
std::vector<std::string> collective_methods(const Context& c, bool cpu);
Shape shape_of(const Row& r);
// An operator row of the methods' default schedule (default_order).
bool operator_row(const Row& r, bool cpu);

// --- a paper table's lines, and the verdicts against the paper (report_common.cpp) ---------------------------------
std::vector<Line> build_lines(const Context& c, const TableDef& t);
// Our measured ratio at a GPU count the paper published, and the paper's (nullopt where either is missing); a
// point agrees where the quotient, as printed (two decimals), lies within 0.80-1.25.
struct PaperPoint {
  int gpus = 0;
  double ours = NAN, paper = NAN;
  double quotient() const { return ours / paper; }
  bool agrees() const;
};
std::optional<PaperPoint> paper_point(const Line& l);
// "measured 1.16x ÷ paper 1.15x = 1.01", "—" where there is none.
std::string versus_cell(const Line& l, const std::string& ref);
// Per method: the ratios to the reference and the verdict against the paper. `quantity`: "time" or "throughput".
std::string trend_paragraph(const std::vector<Line>& lines, const TableDef& t, const std::string& quantity = "time");
// The sentence under a table that names where the simulation predicts it (t.predicted_in); "" where nothing is
// simulated.
std::string predicted_in_md(const Context& c, const TableDef& t);
// `count`: the first column's heading ("" for GPUs with the paper, ranks without).
std::string render_lines(const std::vector<Line>& lines, const std::string& ref, const std::string& value,
                         bool with_paper = true, const std::string& count = "");
// "method ÷ ref: 2.04x at 2, 2.44x at 3" per method, a bullet each: the measured ratios alone, no paper.
std::string ratio_paragraph(const std::vector<Line>& lines, const TableDef& t);
// tables/ID.csv: a row per line. `model_level`: throughputs (tokens/s per GPU) and the measured row's model
// configuration; otherwise times (ms).
void write_table_csv(const Context& c, const std::string& id, const std::vector<Line>& lines, bool model_level = false);

// --- Tables 2-4 (report_tables.cpp) --------------------------------------------------------------------------------
// Table 2 (the collective call at the paper's 2 MiB state, rows of one `timing`: kLatency is set against the paper,
// kBackToBack is not) and Tables 3 and 4 (the operator at L tokens per GPU).
TableDef collective_table(const Context& c, const std::string& timing = kLatency);
// The section of Table 2: the latency table beside the paper, then the back-to-back one (a throughput).
std::string section_table2(Context& c);
// The timing the collective plots and the other collective tables show for GPU rows (or CPU rows, `cpu`): kLatency
// where some collective row of that kind has it, else kBackToBack.
std::string shown_timing(const Context& c, bool cpu);
// "timed as latency: one call after a barrier" or "timed back to back: a throughput", for captions.
std::string timed_words(const std::string& timing);
TableDef operator_table(const Context& c, long long L);
std::string section_floors(const Context& c);
std::string section_data(const Context& c);
// The rows whose code changed since (or is unknown): per commit and level, the changed paths, the files and rows; and
// the table of measured paths per level (report_data.h measured_paths).
std::string section_code_changed(const Context& c);
// The index of results/: per file its kind, level(s), commit(s), rows and whether its code changed since. The same
// Markdown is the generated part of results/README.md, which scripts/check_report.sh compares.
std::string results_index_md(const Context& c);
std::string gpu_table(Context& c, const TableDef& t, const std::string& heading, const std::string& setting,
                      const std::string& value);

// --- the plots (report_figures.cpp, report_timeline.cpp) -----------------------------------------------------------
std::string order_key(const std::vector<std::string>& order, const std::string& method, const std::string& title);
// Writes the plot if it has a series of ours (not only the paper's); else the figure says `missing`.
Figure draw(Context& c, const PlotSpec& p, const std::string& caption, const std::string& missing);
std::string class_label(bool cpu);
Figure plot_collective_vs_gpus(Context& c, bool cpu);
Figure plot_collective_vs_bytes(Context& c, bool cpu);
Figure plot_allscan_vs_block(Context& c, bool cpu);
std::vector<Figure> plot_operator_vs_gpus(Context& c, bool cpu);
std::vector<Figure> plot_scaling(Context& c, bool cpu, bool weak);
std::vector<Figure> plot_timelines(Context& c);
std::string section_exposed(const Context& c);
std::string figure_md(const Figure& f);

// --- the model level (report_model_level.cpp) ----------------------------------------------------------------------
std::vector<Line> model_lines(const Context& c, long long L, bool cpu, const std::string& config = "");
Figure plot_model_throughput(Context& c, long long L, const std::vector<Line>& lines);
std::string section_model_level(Context& c, long long L, const std::string& table);
// Every GPU model-level configuration measured (each schedule, recompute level and head count), beside dp's row of the
// same machine, world size, configuration and gradient schedule (tables/model_rows.csv).
std::string section_model_rows(Context& c);
// spbench's dp at P = 1 against PyTorch + fla (ResultFiles::baseline_rows): throughput and peak memory, per machine
// kind, heads and tokens (tables/spbench_vs_fla.csv).
std::string section_fla(Context& c);

// --- beyond the lent machines: the simulation (report_sim.cpp) ---------------------------------------------------
// The constants of the calibration file DIR/NAME (sim/platforms/*.calib) in markdown: its header, the transports' costs
// in one table (per call and per byte, below and from the split, and the fit's comment), every other key in another.
std::string calib_md(const std::string& dir, const std::string& name);

// The simulated rows (ResultFiles::sim_rows, results/sim/*.csv) of the lent kinds' platforms against the measured rows
// of the same configuration (the hold-out), and the paper's Tables 2 and 3 predicted on kSimPredictPlatform.
inline const char* const kSimPredictPlatform = "dgx-h100";  // the paper's cluster: predictions, never held out
constexpr double kSimWithin = 0.15;  // a hold-out row is within where |simulated - measured| <= 15% of measured
constexpr double kSimMedian = 0.05;  // and a level's hold-out holds where every row is, and the median |error| <= 5%
// One simulated row joined to its measured row.
struct SimPair {
  const Row* sim = nullptr;
  const Row* meas = nullptr;
  double sim_ms = NAN, meas_ms = NAN;  // time_ms_median of each
  double err = NAN;                    // (sim - meas) / meas
  bool calibration = false;            // P = 2 on one node: the platform's constants were fitted there
  bool within = false;                 // |err| <= kSimWithin
};
// Why the hold-out misses where it does: report/src/holdout_causes.csv, a line per (level, method, backend, world_size,
// nodes) with its `cause`, written beside the rows it explains; {} where the file is not there, a UsageError naming
// the file where it is malformed. A miss with no line says kMissNotExplained.
using MissKey = std::tuple<std::string, std::string, std::string, int, int>;  // level, method, backend, P, nodes
std::map<MissKey, std::string> read_holdout_causes(const std::string& path);
inline constexpr const char* kMissNotExplained = "not explained yet (no line in report/src/holdout_causes.csv)";

struct SimHoldOut {
  std::string level;
  std::vector<SimPair> pairs;  // calibration rows first, then by P, nodes, method, backend, size, pass
  // Simulated rows of a lent platform without a measured row of their configuration (left out of the hold-out).
  std::vector<const Row*> unmatched;
  int holdout = 0, within = 0;  // the hold-out rows (not calibration), and how many of them are within kSimWithin
  double median_abs = NAN;      // the median |err| of the hold-out rows
  bool held = false;  // some hold-out rows, every one within kSimWithin, and median_abs <= kSimMedian
  struct Miss {
    std::string method, backend;
    int P = 0, nodes = 1, rows = 0;
    double worst = 0;  // the error of largest magnitude
  };
  std::vector<Miss> misses;  // the hold-out rows outside kSimWithin by (method, backend, P, nodes)
  // "hold-out rows within 15%: n of N, median |error| x%: **held**" (or **missed** and why).
  std::string summary() const;
  // "" where held, else "no verdict: the LEVEL hold-out missed" (or "... no LEVEL hold-out rows"): what a comparison
  // with the paper says instead.
  std::string gate() const;
};
// The hold-out of the rows one paper ratio is made of (DESIGN §10): the hold-out rows (not calibration) of a level
// whose simulated row is of one of `parts` (method, backend) and of `timing` (timing_of: kLatency or kBackToBack at
// the collective level, "" at the others). It holds where every part has a hold-out row and every one of those rows
// is within kSimWithin.
struct RatioHoldOut {
  std::vector<std::pair<std::string, std::string>> parts;  // (method, backend)
  std::string timing;
  int rows = 0, within = 0;
  std::vector<std::string> missing;  // the parts without a hold-out row, as "allscan (host-hier)"
  bool held = false;
  std::string what() const;     // "allgather (nccl) and allscan (host-hier), latency"
  std::string summary() const;  // what() + ": 12 of 14 rows within 15%" (and the parts with none)
  std::string gate() const;     // "" where held, else "no verdict: ..." (why)
};
RatioHoldOut ratio_holdout(const SimHoldOut& h, const std::vector<std::pair<std::string, std::string>>& parts,
                           const std::string& timing);

// One point of ZeCO's claim against the paper: our ratio (method ÷ ref) at a GPU count the paper published, and what
// came of it (the report's first section gathers them).
struct Claim {
  enum Kind { none, agrees, disagrees, no_verdict, not_compared } kind = none;
  int gpus = 0;
  std::string method;
  double ratio = NAN, paper_ratio = NAN;  // ours (simulated) and the paper's
  double quotient = NAN;                  // ours ÷ the paper's ratio
  RatioHoldOut holdout;   // simulated: the hold-out of the ratio's rows, which a verdict rests on
};
// The verdicts of a prediction table (section_simulation): Table 2 in `timing` (collective), Tables 3 and 4
// (operator) or 5 and 6 (model) at `tokens` per GPU, with ratios ÷ `ref` ("": the table's own reference); one Claim
// per line with a ratio to compare.
std::vector<Claim> simulated_claims(const Context& c, const std::string& level, long long tokens,
                                    const std::string& timing, const std::string& ref = "");

// The hold-out of `level` (collective or operator): each simulated row (`simulated` = 1) whose platform is not
// kSimPredictPlatform, the newest per configuration, joined to the newest `measured` row (not simulated) of the same
// configuration. Collective: method, backend, world size, bytes, block_elems, nodes, ranks per node and timing
// (latency or back_to_back), pass comm.
// Operator: method, backend, world size, batch, heads, dk, dv, tokens per rank, dtype,
// pass, schedule (schedule_of), nodes, ranks per node. Backends match as equal strings, but a simulated `nccl` row over
// several nodes matches the measured `nccl-socket` row (the network transport is the platform's).
SimHoldOut sim_holdout(const std::string& level, const std::vector<const Row*>& measured,
                       const std::vector<const Row*>& simulated);
// The section: what is simulated, the calibration constants (sim/platforms/*.calib) and platform files, the hold-out
// tables (tables/sim_holdout_LEVEL.csv), the paper's Tables 2-6 on kSimPredictPlatform (tables/sim_table2.csv, ...;
// Table 2 in each timing; a verdict on a ratio only where its RatioHoldOut held) and their plots
// (plots/sim_LEVEL_vs_gpus.*).
std::string section_simulation(Context& c);
// The simulation's predictions of the paper's tables: per (GPUs, method) the simulated row of kSimPredictPlatform at
// the paper's setting of `level` (collective: Table 2's state; operator and model: `tokens` per GPU), the fastest
// backend where several (the rows section_simulation's predicted tables show).
std::map<std::pair<int, std::string>, const Row*> simulated_predictions(const Context& c, const std::string& level,
                                                                        long long tokens = 16384);
// A series of those predictions in a plot: the method's colour, a dashed line of open squares, "M simulated, PLATFORM".
PlotSeries predicted_series(const std::string& method);
// Along a series' rows in order of GPUs: a label at the row `r` (at height y) whose backend is not the one before it
// (zeco's All-Scan turns from the device protocol to the rail scan where the GPUs span several nodes).
void label_backend_change(PlotSeries& s, std::string& last_backend, const Row& r, double y);

// --- the paper's two headline figures (report_paper_figures.cpp) --------------------------------------------------
// Tokens/s per GPU against GPUs (the paper's Figure 1: the operator level, and the model level where rows exist) and
// "1M tokens on 64 GPUs versus 16K on one", each point measured (a results row, its file named) or simulated (a row
// of simulated_predictions), the paper's numbers beside them; the plots, their tables (tables/fig_*.csv) and the README section.
std::string section_paper_figures(Context& c);

// --- does ZeCO's claim hold? (report_claim.cpp) ------------------------------------------------------------------
// The report's opening: "In short" (in a few sentences, what the measured rows show at the GPU counts measured, what
// the simulation predicts past them and how many of its verdicts agree with the paper, what is not known and why),
// then "Does ZeCO's claim hold?" (per paper table and ratio, what the measured and the simulated rows say against
// the paper: agrees, disagrees, or not known, and why), both from one set of lines and claims, the tables' own.
std::string section_claim(Context& c);

// --- long contexts, simulated (report_long.cpp) --------------------------------------------------------------------
// GLA-1B at 65536 tokens per GPU with --recompute=blocks on kSimPredictPlatform at 8..256 GPUs: a step per method
// beside dp's (tables/sim_long_context.csv), and what a 1M- and an 8M-token sequence cost.
std::string section_long_context(Context& c);

// --- Gated DeltaNet (report_gdn.cpp) --------------------------------------------------------------------------------
std::string section_gdn(const Context& c);

// --- CPU ranks (report_cpu.cpp) -------------------------------------------------------------------------------------
std::string section_cpu_model(const Context& c);
std::string section_cpu(Context& c, const std::vector<Figure>& figs);

}  // namespace report_detail
}  // namespace spb
