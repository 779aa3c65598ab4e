#!/usr/bin/env bash
# The report's plots say what each series is, and its two headline figures label every point.
# Generates a report (--no-plots: the .gp and .dat are what is checked) from RESULTS_DIR, then:
#   1. every plot but the timelines: each series' style is one of the four kinds (measured: lw 2 and a dash type;
#      paper: open circles or large stars, no line; simulated (report_sim.cpp): large open circles without a line, or
#      a dashed line of open squares; reference: black) and its legend title says so: "METHOD (BACKEND) measured[,
#      ...]", "METHOD paper[, ...]", "METHOD[ (BACKEND)] simulated, PLATFORM"; the data file heads its block with the
#      same kind and title; within a plot a backend keeps one dash type and two backends never share one, and a method
#      keeps one colour (but in allscan_vs_block, coloured by world size);
#   2. each figure named in FIGURES (plots/NAME.gp, tables/NAME.csv) has a measured series; every point of its table
#      is labelled measured (its source a file of RESULTS_DIR), simulated (a file of RESULTS_DIR/sim) or paper; the
#      README shows its table with measured cells, and where the figure has simulated points, a simulated series and
#      simulated cells;
#      a measured series of another GPU kind (H100 beside H200) keys its dash and colour by the kind too, and two kinds
#      of one method and backend differ in colour, dash and marker;
#   3. the checks bite: a copy of the report with one legend's backend removed, one with a figure point's label
#      removed, and one with an H100 series drawn as the H200 one, must each fail them.
# Usage: check_report_plots.sh SPBENCH PAPER_CSV RESULTS_DIR WORKDIR [FIGURE...]   (prints REPORT_PLOTS_OK)
set -euo pipefail
spbench=$1 paper=$2 results=$3 work=$4
shift 4
figures=("$@")
rm -rf "$work" && mkdir -p "$work"
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
"$spbench" report --no-plots --results "$results" --paper "$paper" --out "$work/out" >"$work/log" 2>&1 || {
  cat "$work/log"; echo "check_report_plots: spbench report failed"; exit 1; }

# check OUT: the checks 1 and 2 on a generated report; prints each failure, returns 1 on any.
check() {
  local out=$1 fail=0 gp name
  local n=0
  for gp in "$out"/plots/*.gp; do
    [ -e "$gp" ] || continue
    name=$(basename "$gp" .gp)
    case $name in timeline_*) continue ;; esac
    n=$((n + 1))
    declare -A dash_of=() backend_of=() colour_of=() look_of=()
    local line idx style title kind head method backend dash colour gk point
    while IFS= read -r line; do
      [[ $line =~ \"$name\.dat\"\ index\ ([0-9]+)\ using\ [^\ ]+\ (.*)\ title\ \"(.*)\"(,\ \\)?$ ]] || continue
      idx=${BASH_REMATCH[1]} style=${BASH_REMATCH[2]} title=${BASH_REMATCH[3]}
      if [[ $style =~ ^with\ linespoints\ lw\ 2\  ]]; then kind=measured
      elif [[ $style =~ ^with\ points\ pt\ (6|3\ ps\ 2\.6)\  ]]; then kind=paper
      elif [[ $style =~ ^with\ points\ lw\ 1\.5\ pt\ 6\ ps\ 2\.0\  || $style =~ ^with\ linespoints\ lw\ 1\.5\ dt\ 2\ pt\ 4\  ]]
      then kind=simulated
      elif [[ $style =~ \#000000 ]]; then kind=reference
      else echo "$name.gp [$idx]: a series of no known kind: $style"; fail=1; continue; fi
      head=$(grep -xF -- "# [$idx] $kind: $title" "$out/plots/$name.dat" || true)
      [ -n "$head" ] || { echo "$name.dat [$idx]: not headed '# [$idx] $kind: $title'"; fail=1; }
      case $kind in
        measured)
          if [[ $title =~ ^([A-Za-z0-9_]+)\ \(([^\)]+)\)\ $kind(,\ .*)?$ ]]; then
            method=${BASH_REMATCH[1]} backend=${BASH_REMATCH[2]}
          else
            echo "$name.gp [$idx]: a $kind series whose legend does not name its method and backend: \"$title\""
            fail=1; continue
          fi
          [[ $style =~ lc\ rgb\ \"(#[0-9a-f]+)\" ]] && colour=${BASH_REMATCH[1]}
          # The GPU kind (H100, H200, ...) of a measured series: each kind has its own styles.
          gk=
          [ "$kind" = measured ] && [[ $title =~ (H[0-9]{3}) ]] && gk=${BASH_REMATCH[1]}
          if [ "$kind" = measured ]; then
            [[ $style =~ (dt\ ([0-9]+|\([0-9,]+\))) ]] && dash=${BASH_REMATCH[1]}
            [[ $style =~ pt\ ([0-9]+) ]] && point=${BASH_REMATCH[1]}
            if [ -n "${dash_of[$backend|$gk]:-}" ] && [ "${dash_of[$backend|$gk]}" != "$dash" ]; then
              echo "$name.gp: backend $backend ${gk:+on $gk }drawn with ${dash_of[$backend|$gk]} and $dash"; fail=1; fi
            if [ -n "${backend_of[$dash]:-}" ] && [ "${backend_of[$dash]}" != "$backend|$gk" ]; then
              echo "$name.gp: ${backend_of[$dash]} and $backend|$gk share $dash"; fail=1; fi
            dash_of[$backend|$gk]=$dash backend_of[$dash]=$backend\|$gk
            # Two GPU kinds of one method and backend differ in colour, dash and marker.
            local k2 other
            for k2 in "${!look_of[@]}"; do
              [[ $k2 == "$method|$backend|"* ]] && [ "$k2" != "$method|$backend|$gk" ] || continue
              other=${look_of[$k2]}
              read -r oc od op <<<"$other"
              if [ "$oc" = "$colour" ] || [ "$od" = "${dash// /_}" ] || [ "$op" = "$point" ]; then
                echo "$name.gp: $method ($backend) on ${k2##*|} and on $gk not told apart (colour, dash and marker)"; fail=1; fi
            done
            look_of[$method|$backend|$gk]="$colour ${dash// /_} $point"
          fi
          if [[ $name != *allscan_vs_block ]]; then
            if [ -n "${colour_of[$method|$gk]:-}" ] && [ "${colour_of[$method|$gk]}" != "$colour" ]; then
              echo "$name.gp: method $method drawn in ${colour_of[$method|$gk]} and $colour"; fail=1; fi
            colour_of[$method|$gk]=$colour
          fi
          ;;
        simulated)
          [[ $title =~ ^[A-Za-z0-9_]+(\ \([^\)]+\))?\ simulated,\ .+$ ]] || {
            echo "$name.gp [$idx]: a simulated series not labelled 'METHOD[ (BACKEND)] simulated, PLATFORM': \"$title\""
            fail=1; }
          ;;
        paper)
          [[ $title =~ ^[A-Za-z0-9_]+\ paper(,\ .*)?$ ]] || {
            echo "$name.gp [$idx]: a paper series not labelled 'METHOD paper': \"$title\""; fail=1; }
          ;;
      esac
    done <"$gp"
    unset dash_of backend_of colour_of look_of
  done
  [ "$n" -gt 0 ] || { echo "no plot to check in $out/plots"; fail=1; }
  local f csv
  for f in "${figures[@]}"; do
    gp=$out/plots/$f.gp csv=$out/tables/$f.csv
    [ -f "$gp" ] || { echo "figure $f: no plots/$f.gp"; fail=1; continue; }
    grep -q ') measured' "$gp" || { echo "figure $f: no measured series"; fail=1; }
    [ -f "$csv" ] || { echo "figure $f: no tables/$f.csv"; fail=1; continue; }
    [ "$(head -1 "$csv")" = "gpus,tokens_in_all,method,backend,label,value,unit,source,git_sha,code_state" ] || {
      echo "figure $f: tables/$f.csv has another header"; fail=1; }
    local gpus tokens m be label value unit source sha state
    while IFS=, read -r gpus tokens m be label value unit source sha state; do
      case $label in
        measured)
          [[ $source =~ ^results/(.+\.csv)$ ]] && [ -f "$results/${BASH_REMATCH[1]}" ] || {
            echo "figure $f: a measured point ($m at $gpus) whose source is not a results file: '$source'"; fail=1; }
          [ -n "$state" ] || { echo "figure $f: a measured point ($m at $gpus) without its code state"; fail=1; } ;;
        simulated)
          [[ $source =~ ^results/(sim/.+\.csv)$ ]] && [ -f "$results/${BASH_REMATCH[1]}" ] || {
            echo "figure $f: a simulated point ($m at $gpus) whose source is not a file of results/sim: '$source'"
            fail=1; } ;;
        paper) ;;
        *) echo "figure $f: a point ($m at $gpus) labelled neither measured, simulated nor paper: '$label'"; fail=1 ;;
      esac
    done < <(tail -n +2 "$csv")
    grep -qF "(plots/$f.png)" "$out/README.md" || { echo "figure $f: not in the README"; fail=1; continue; }
    # The table beside the plot: from the figure to the next heading.
    awk -v png="(plots/$f.png)" 'index($0, png) { on = 1; next } on && /^#/ { exit } on' "$out/README.md" >"$work/table"
    grep -q '^| [0-9].* [0-9.]* measured' "$work/table" || {
      echo "figure $f: the README's table beside it lacks measured cells"; fail=1; }
    if grep -q '^[^,]*,[^,]*,[^,]*,[^,]*,simulated,' "$csv"; then
      grep -q ' simulated, ' "$gp" || { echo "figure $f: simulated points but no simulated series"; fail=1; }
      grep -q '^| [0-9].* [0-9.]* simulated' "$work/table" || {
        echo "figure $f: simulated points but the README's table beside it has no simulated cells"; fail=1; }
    fi
  done
  return $fail
}

status=0
check "$work/out" || status=1

# The checks must fail on a report that lost a legend's backend or a figure point's label.
cp -r "$work/out" "$work/broken_legend"
gp=$(grep -l ') measured' "$work"/broken_legend/plots/*.gp | head -1)
sed -i '0,/ ([^)]*) measured/s// measured/' "$gp"
if check "$work/broken_legend" >/dev/null; then
  echo "check_report_plots: a legend without its backend ($gp) passed the checks"; status=1; fi
# ... and on one where an H100 series is drawn exactly as the H200 series of its method and backend.
h100=$(grep -l 'measured, NVIDIA H100' "$work"/out/plots/*.gp | head -1 || true)
if [ -n "$h100" ]; then
  cp -r "$work/out" "$work/same_gpu_style"
  g=$work/same_gpu_style/plots/$(basename "$h100")
  sed -i -E '/measured, NVIDIA H100/{s/dt \([0-9,]+\) pt [0-9]+ ps 1.1 lc rgb "#[0-9a-f]+"/dt 1 pt 5 ps 1.1 lc rgb "#7f7f7f"/}' "$g"
  if check "$work/same_gpu_style" >/dev/null; then
    echo "check_report_plots: H100 and H200 series drawn alike ($g) passed the checks"; status=1; fi
fi
if [ ${#figures[@]} -gt 0 ]; then
  cp -r "$work/out" "$work/broken_label"
  sed -i '0,/,measured,/s//,,/' "$work/broken_label/tables/${figures[0]}.csv"
  if check "$work/broken_label" >/dev/null; then
    echo "check_report_plots: a figure point without its label passed the checks"; status=1; fi
fi
[ $status -eq 0 ] && echo REPORT_PLOTS_OK
exit $status
