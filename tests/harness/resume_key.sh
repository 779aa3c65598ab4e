#!/usr/bin/env bash
# resume_key.sh CSV BASE_ARGS -- VARIANT... -- MPIRUN... SPBENCH: the resume key is the configuration. Runs
# `MPIRUN... SPBENCH BASE_ARGS --csv CSV` (a row), again (it must say "skipped" and add no row), then once per VARIANT
# (a quoted string of flags added to BASE_ARGS): each must measure (no "skipped", rows added), and again (skipped).
set -u
csv=$1; shift
base=()
while [ "$1" != "--" ]; do base+=("$1"); shift; done
shift
variants=()
while [ "$1" != "--" ]; do variants+=("$1"); shift; done
shift
cmd=("$@")
rm -f "$csv"
rows() { grep -vc '^level,' "$csv"; }
# BASE_ARGS with the variant's flags in place of the same flags there (a flag given twice is refused).
run() {
  local args=() i=0 words=" $* "
  while [ $i -lt ${#base[@]} ]; do
    if [[ "${base[$i]}" == -* ]] && [[ "$words" == *" ${base[$i]} "* ]]; then
      # the flag and, where the next word is not a flag, its value
      if [ $((i + 1)) -lt ${#base[@]} ] && [[ "${base[$((i + 1))]}" != -* ]]; then i=$((i + 2)); else i=$((i + 1)); fi
      continue
    fi
    args+=("${base[$i]}"); i=$((i + 1))
  done
  timeout 60 "${cmd[@]}" "${args[@]}" --csv "$csv" "$@" 2>&1
}
fail() { echo "FAIL: $1"; exit 1; }
run > /dev/null || fail "the first run failed"
n=$(rows)
[ "$n" -ge 1 ] || fail "the first run wrote no row"
run | grep -q 'skipped' || fail "an identical rerun measured again"
[ "$(rows)" -eq "$n" ] || fail "an identical rerun added rows"
for v in "${variants[@]}"; do
  # shellcheck disable=SC2086
  out=$(run $v) || fail "$v: the run failed: $out"
  printf '%s\n' "$out" | grep -q 'skipped' && fail "$v: skipped, though it changes the configuration"
  [ "$(rows)" -gt "$n" ] || fail "$v: no row added"
  n=$(rows)
  # shellcheck disable=SC2086
  run $v | grep -q 'skipped' || fail "$v: an identical rerun measured again"
  [ "$(rows)" -eq "$n" ] || fail "$v: an identical rerun added rows"
  echo "ok: $v reruns, and is skipped the second time"
done
echo "RESUME_KEY_OK"
