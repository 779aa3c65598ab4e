// spbench: one binary, one subcommand per level (DESIGN §4). Run it under mpirun/srun, one process per GPU (or per CPU
// rank with --backend cpu).
#include <CLI/CLI.hpp>

#include <cstdio>

#include "runtime/bootstrap.h"
#include "runtime/csv.h"
#include "sp/collective.h"
#include "harness/collective_level.h"
#include "report/src/compare.h"
#include "runtime/error.h"
#include "sp/method.h"
#include "harness/model_level.h"
#include "harness/operator_level.h"
#include "report/src/report.h"
#include "runtime/provenance.h"
#include "runtime/watchdog.h"
#include "sim/calibration.h"

int main(int argc, char** argv) {
  spb::Bootstrap boot(&argc, &argv);
  const bool root = boot.rank() == 0;

  CLI::App app{"spbench: sequence parallelism for linear attention (GLA), measured"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "spbench " + spb::git_sha());  // the sha its rows carry (scripts compare it)
  spb::OperatorOptions op;
  CLI::App* op_cmd = app.add_subcommand("operator", "SP GLA attention forward+backward of one method, timed and checked");
  spb::add_operator_command(*op_cmd, op);
  spb::ModelOptions mo;
  CLI::App* model_cmd = app.add_subcommand("model", "training steps of the GLA language model with an SP method, timed and checked");
  spb::add_model_command(*model_cmd, mo);
  spb::CollectiveOptions co;
  CLI::App* co_cmd = app.add_subcommand("collective", "the SP methods' communication patterns alone (nccl-tests style)");
  spb::add_collective_command(*co_cmd, co);
  spb::ReportOptions ro;
  CLI::App* report_cmd = app.add_subcommand("report", "results/ and the paper's numbers into report/ (tables, plots)");
  spb::add_report_command(*report_cmd, ro);
  spb::CompareOptions cmp;
  CLI::App* compare_cmd = app.add_subcommand("compare", "BASE.csv NEW.csv: faster, same or slower per row");
  spb::add_compare_command(*compare_cmd, cmp);
  CLI::App* csv_cmd = app.add_subcommand("csv", "results CSV upkeep");
  csv_cmd->require_subcommand(1);
  std::string repair_file;
  CLI::App* repair_cmd = csv_cmd->add_subcommand(
      "repair", "FILE: drop a last row cut short (no newline; by a full disk or a killed run), keeping FILE.bak");
  repair_cmd->add_option("file", repair_file, "the CSV")->required();
  spb::CalibrationOptions cal;
  CLI::App* cal_cmd = app.add_subcommand(
      "sim-calibrate",
      "a simulated platform's transport costs (per call, per byte) from the measured and simulated rows at P = 2");
  cal_cmd->add_option("--measured-collective", cal.measured_collective, "measured collective rows")->required();
  cal_cmd->add_option("--measured-operator", cal.measured_operator, "measured operator rows")->required();
  cal_cmd->add_option("--simulated-collective", cal.simulated_collective, "simulated collective rows at P = 2")
      ->required();
  cal_cmd->add_option("--simulated-operator", cal.simulated_operator, "simulated operator rows at P = 2")->required();
  cal_cmd->add_option("--stages", cal.stages, "the stage table the simulated rows ran with")->required();
  cal_cmd->add_option("--calibration", cal.calibration, "the constants the simulated rows ran with")->required();
  cal_cmd->add_option("--out", cal.out, "the .calib file to write")->required();
  CLI::App* methods_cmd = app.add_subcommand("methods", "list the registered SP methods");
  CLI::App* patterns_cmd = app.add_subcommand("patterns", "list the registered collective patterns");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return root ? app.exit(e) : 0;
  } catch (const CLI::CallForVersion& e) {
    return root ? app.exit(e) : 0;
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same arguments, so all stop here together; one prints, on one line.
    if (root) std::fprintf(stderr, "spbench: error: %s (spbench %s --help)\n", e.what(),
                           app.get_subcommands().empty() ? "" : app.get_subcommands()[0]->get_name().c_str());
    return 2;
  }

  try {
    spb::watchdog_start(boot.rank());  // every blocking wait from here on is bounded by SPB_TIMEOUT_S
    if (*methods_cmd) {
      if (root)
        for (auto& name : spb::method_names()) std::printf("%-10s %s\n", name.c_str(), spb::find_method(name)->summary.c_str());

      return 0;
    }
    if (*patterns_cmd) {
      if (root)
        for (auto& name : spb::pattern_names()) std::printf("%-10s %s\n", name.c_str(), spb::find_pattern(name)->summary.c_str());
      return 0;
    }
    if (*op_cmd) return spb::run_operator(boot, op);
    if (*model_cmd) return spb::run_model(boot, mo);
    if (*co_cmd) return spb::run_collective(boot, co);
    if (*report_cmd) return root ? spb::run_report(ro) : 0;
    if (*compare_cmd) return root ? spb::run_compare(cmp) : 0;
    if (*repair_cmd) return root ? spb::repair_csv(repair_file) : 0;
    if (*cal_cmd) return root ? spb::run_sim_calibrate(cal) : 0;
  } catch (const spb::RankUsageError& e) {
    // Found in this rank's own work: the others may wait for it in a collective.
    std::fprintf(stderr, "spbench: error: rank %d: %s\n", boot.rank(), e.what());
    std::fflush(stderr);
    boot.abort(2);
  } catch (const spb::UsageError& e) {
    // Raised the same way on every rank (or agreed on through the bootstrap): stop together, one line.
    if (root) std::fprintf(stderr, "spbench: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    // A broken invariant or a failed library call on this rank: other ranks may be waiting in a collective.
    std::fprintf(stderr, "spbench: internal error: %s\n", e.what());
    std::fflush(stderr);
    boot.abort(3);
  }
  return 0;
}
