#!/usr/bin/env bash
# Every plot of a report drawn by gnuplot keeps its texts inside the canvas (check_plot_text_fits.sh), and the check
# bites: one plot redrawn with a planted over-long title must fail it.
# Usage: check_plot_texts.sh SPBENCH PAPER_CSV RESULTS_DIR WORKDIR   (prints REPORT_TEXTS_OK; exit 77 without gnuplot)
set -euo pipefail
spbench=$1 paper=$2 results=$3 work=$4
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
command -v gnuplot >/dev/null || { echo "no gnuplot: skipped"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
"$spbench" report --results "$results" --paper "$paper" --out "$work/out" >"$work/log" 2>&1 || {
  cat "$work/log"; echo "check_plot_texts: spbench report failed"; exit 1; }
shopt -s nullglob
svgs=("$work"/out/plots/*.svg)
[ ${#svgs[@]} -gt 0 ] || { echo "check_plot_texts: no SVG drawn"; exit 1; }
status=0
bash "$here/check_plot_text_fits.sh" "${svgs[@]}" || status=1
# Plant: a title of 160 characters on one line, redrawn.
gp=$(ls "$work"/out/plots/*.gp | head -1)
name=$(basename "$gp" .gp)
sed -i "s/^set title .*/set title \"$(printf 'A title far too long for its canvas %.0s' {1..5})\" noenhanced/" "$gp"
(cd "$work/out/plots" && gnuplot "$name.gp")
if bash "$here/check_plot_text_fits.sh" "$work/out/plots/$name.svg" >/dev/null; then
  echo "check_plot_texts: a planted over-long title in $name passed"; status=1; fi
[ $status -eq 0 ] && echo REPORT_TEXTS_OK
exit $status
