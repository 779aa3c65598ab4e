#!/usr/bin/env bash
# The report drift check (CI runs it through ctest: report.drift). Regenerates the report from the committed results/
# and the paper's numbers into a temporary directory and compares it with the committed report/:
#   - every text file must be identical: README.md, tables/*.csv, plots/*.gp and plots/*.dat (the plots' scripts and
#     the data they are drawn from), and no text file may be missing or extra on either side;
#   - the images (plots/*.png, plots/*.svg) are not compared byte for byte: gnuplot and cairo builds differ in how they
#     encode the same drawing. Only their names must match, so a plot that appeared or vanished is still caught.
#   - report/paper/ is the paper's published numbers, an input kept by hand (its README says where they come from):
#     the report is generated from it, and it is not compared; nor is report/src/, the generator's source.
# Usage: scripts/check_report.sh [SPBENCH]   (default: build/spbench). On drift it prints the diff and how to
# regenerate, and exits 1.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
spbench=${1:-$root/build/spbench}
paper=$root/report/paper/paper_tables.csv
[ -x "$spbench" ] || { echo "check_report: no spbench at $spbench (build first, or pass its path)"; exit 2; }
[ -f "$paper" ] || { echo "check_report: the paper's numbers are missing: $paper (report/paper/ is committed with the repository)"; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
results=$root/results
[ -d "$results" ] || { results=$tmp/no_results; mkdir -p "$results"; }  # git keeps no empty results/
plots=()
command -v gnuplot >/dev/null || plots=(--no-plots)  # the scripts are still written and compared
# OpenMPI singletons as root (CI containers) need to be told it is fine.
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
"$spbench" report --results "$results" --paper "$paper" --out "$tmp/report" "${plots[@]}" >"$tmp/log" 2>&1 || {
  cat "$tmp/log"; echo "check_report: spbench report failed"; exit 1; }

regen="regenerate it: build/spbench report   (then commit report/)"
if [ ! -d "$root/report" ]; then
  echo "check_report: report/ is missing; $regen"; exit 1
fi
status=0
if ! diff -r -u -x '*.png' -x '*.svg' -x paper -x src "$root/report" "$tmp/report" >"$tmp/diff"; then
  head -200 "$tmp/diff"
  echo "check_report: report/ has drifted from results/ (text files differ above); $regen"
  status=1
fi
images() { (cd "$1" && find . \( -path ./paper -o -path ./src \) -prune -o -type f \( -name '*.png' -o -name '*.svg' \) -print | LC_ALL=C sort); }
if [ ${#plots[@]} -eq 0 ] && ! diff -u <(images "$root/report") <(images "$tmp/report"); then
  echo "check_report: report/ has other plot images than results/ gives (names above); $regen"
  status=1
fi
[ $status -eq 0 ] && echo "check_report: report/ matches results/ ($(find "$tmp/report" -type f | wc -l) files regenerated)"
exit $status
