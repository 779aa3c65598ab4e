#!/usr/bin/env bash
# test_check_scripts.sh SPBENCH WORKDIR: check_against_torch.sh and check_against_fla.sh (and run_then_check.sh, which
# they share) without torch, fla or a GPU: a stub python3 on PATH answers their probes for torch, CUDA and fla and
# stands in for the references, and a stub spbench fails or writes a dump as told. Each case compares a script's whole
# output and exit code with what it must print; one case runs the real SPBENCH (--backend cpu) under the torch
# script. Prints CHECK_SCRIPTS_OK when every case passed.
set -euo pipefail
if [ $# -ne 2 ]; then echo "usage: $0 SPBENCH WORKDIR" >&2; exit 2; fi
spbench=$1; work=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rm -rf "$work"
mkdir -p "$work/bin"
stubs=$work/bin

# python3: FAKE_TORCH, FAKE_CUDA, FAKE_FLA (1: present) answer the probes; fla_kernel_probe.py prints its arguments
# and exits FAKE_PROBE_RC (default 0); a reference prints its arguments, whether the dump is there, and exits
# FAKE_REF_RC where the dump's name is FAKE_REF_FAIL, else 0.
cat > "$stubs/python3" <<'STUB'
#!/usr/bin/env bash
if [ "$1" = -c ]; then
  case "$2" in
    *cuda.is_available*) [ "${FAKE_TORCH:-1}" = 1 ] && [ "${FAKE_CUDA:-0}" = 1 ]; exit ;;
    *"import fla"*) [ "${FAKE_FLA:-1}" = 1 ]; exit ;;
    *"import torch"*) [ "${FAKE_TORCH:-1}" = 1 ]; exit ;;
  esac
  exit 1
fi
if [ "$(basename "$1")" = fla_kernel_probe.py ]; then echo "probe ${*:2}"; exit "${FAKE_PROBE_RC:-0}"; fi
echo "reference $(basename "$1") $(basename "$2") ${*:3}"
if [ -f "$2/manifest.csv" ]; then echo "dump present"; else echo "no dump"; fi
if [ "$(basename "$2")" = "${FAKE_REF_FAIL:-}" ]; then exit "${FAKE_REF_RC:-1}"; fi
exit 0
STUB
# spbench: fails (exit 3) where its backend or "H<heads>" is in FAKE_SPB_FAIL, else writes a dump.
cat > "$stubs/spbench" <<'STUB'
#!/usr/bin/env bash
dump="" backend="" heads=""
while [ $# -gt 0 ]; do
  case $1 in --dump) dump=$2; shift ;; --backend) backend=$2; shift ;; --heads) heads=$2; shift ;; esac
  shift
done
if [[ " ${FAKE_SPB_FAIL:-} " == *" $backend "* || " ${FAKE_SPB_FAIL:-} " == *" H$heads "* ]]; then
  echo "stub spbench: failed"; exit 3
fi
mkdir -p "$dump" && touch "$dump/manifest.csv"
echo "stub spbench --backend $backend --heads $heads"
STUB
chmod +x "$stubs/python3" "$stubs/spbench"

failed=0
# expect NAME WANT_RC WANT_OUTPUT -- COMMAND...: runs COMMAND with the stubs first on PATH and compares its exit code
# and stdout (the work folder shown as W; stderr is mpirun's report of a failed rank, and the usage line, which
# usage() brings to stdout).
expect() {
  local name=$1 want_rc=$2 want=$3; shift 4
  local out rc=0
  out=$(PATH="$stubs:$PATH" "$@" 2>/dev/null) || rc=$?
  out=${out//$work/W}
  if [ "$rc" != "$want_rc" ] || [ "$out" != "$want" ]; then
    echo "FAIL $name: exit $rc (want $want_rc); output:"; echo "$out"; echo "-- want:"; echo "$want"
    failed=1
  else
    echo "ok   $name"
  fi
}
usage() { bash "$@" 2>&1; }
torch_sh=$here/check_against_torch.sh
fla_sh=$here/check_against_fla.sh

expect torch.usage 2 "usage: $torch_sh SPBENCH OUTDIR" -- usage "$torch_sh" "$stubs/spbench"
expect torch.no_torch 0 "skipped: no python3 torch" -- env FAKE_TORCH=0 bash "$torch_sh" "$stubs/spbench" "$work/t0"
expect torch.gpu_run_fails 1 "== spbench model --backend gpu -> W/t1/dump_gpu
stub spbench: failed
FAIL: spbench model --backend gpu
== spbench model --backend cpu -> W/t1/dump_cpu
stub spbench --backend cpu --heads 2
== torch reference (cpu) vs W/t1/dump_cpu
reference torch_reference.py dump_cpu --device cpu
dump present" -- env FAKE_SPB_FAIL=gpu bash "$torch_sh" "$stubs/spbench" "$work/t1"
expect torch.check_fails 1 "== spbench model --backend cpu -> W/t2/dump_cpu
stub spbench --backend cpu --heads 2
== torch reference (cuda) vs W/t2/dump_cpu
reference torch_reference.py dump_cpu --device cuda
dump present
FAIL: cpu dump (torch_reference exit 1)" -- env BACKENDS=cpu FAKE_CUDA=1 FAKE_REF_FAIL=dump_cpu \
  bash "$torch_sh" "$stubs/spbench" "$work/t2"
expect torch.all_pass 0 "== spbench model --backend gpu -> W/t3/dump_gpu
stub spbench --backend gpu --heads 2
== torch reference (cpu) vs W/t3/dump_gpu
reference torch_reference.py dump_gpu --device cpu
dump present
== spbench model --backend cpu -> W/t3/dump_cpu
stub spbench --backend cpu --heads 2
== torch reference (cpu) vs W/t3/dump_cpu
reference torch_reference.py dump_cpu --device cpu
dump present
all model checks passed (gpu cpu)" -- bash "$torch_sh" "$stubs/spbench" "$work/t3"
# The real spbench on CPU ranks: its own output left out, the script's lines kept.
real_cpu_run() {
  BACKENDS=cpu bash "$torch_sh" "$spbench" "$work/t4" | grep -E '^(==|FAIL|reference|dump|no dump|all model)'
}
expect torch.real_cpu_run 0 "== spbench model --backend cpu -> W/t4/dump_cpu
== torch reference (cpu) vs W/t4/dump_cpu
reference torch_reference.py dump_cpu --device cpu
dump present
all model checks passed (cpu)" -- real_cpu_run

export FLA_SRC=$work/fla_src
expect fla.usage 2 "usage: $fla_sh SPBENCH OUTDIR" -- usage "$fla_sh"
expect fla.no_gpu 77 "skipped: no python3 torch with a GPU" -- bash "$fla_sh" "$stubs/spbench" "$work/f0"
expect fla.no_fla 77 "skipped: fla is not importable (PYTHONPATH=W/fla_src)" -- \
  env -u PYTHONPATH FAKE_CUDA=1 FAKE_FLA=0 bash "$fla_sh" "$stubs/spbench" "$work/f1"
# What check_against_fla.sh prints for its kernel probe (fla_probe MODE), and for one head count whose run and check
# both ran (fla_item FOLDER HEADS [PRECISION [MODE]]), with the stubs above.
fla_probe() {
  echo "== fla's GLA kernels against fp64 (the check uses $1)"
  echo "probe --require $1"
}
fla_item() {
  local dump=dump_fla_H$2
  echo "== spbench model --backend gpu, $2 heads -> W/$1/$dump"
  echo "stub spbench --backend gpu --heads $2"
  echo "== fla's GLAForCausalLM vs W/$1/$dump"
  echo "reference fla_reference.py $dump --precision ${3:-calibrated} --attn-mode ${4:-fused_recurrent}"
  echo "dump present"
}
expect fla.run_fails 1 "$(fla_probe fused_recurrent)
$(fla_item f2 32)
== spbench model --backend gpu, 4 heads -> W/f2/dump_fla_H4
stub spbench: failed
FAIL: spbench model, 4 heads" -- env FAKE_CUDA=1 FAKE_SPB_FAIL=H4 bash "$fla_sh" "$stubs/spbench" "$work/f2"
expect fla.check_fails 1 "$(fla_probe fused_recurrent)
$(fla_item f3 32)
$(fla_item f3 4)
FAIL: 4 heads (fla_reference exit 1)" -- env FAKE_CUDA=1 FAKE_REF_FAIL=dump_fla_H4 \
  bash "$fla_sh" "$stubs/spbench" "$work/f3"
expect fla.fixed_bar_ref_missing 1 "$(fla_probe chunk)
$(fla_item f6 32 autocast chunk)
FAIL: 32 heads (fla_reference exit 3)" -- env FAKE_CUDA=1 FAKE_REF_FAIL=dump_fla_H32 FAKE_REF_RC=3 \
  FLA_CHECK_HEADS=32 FLA_REF_PRECISION=autocast FLA_ATTN_MODE=chunk bash "$fla_sh" "$stubs/spbench" "$work/f6"
expect fla.probe_fails 1 "$(fla_probe fused_recurrent)
FAIL: fla's fused_recurrent kernel disagrees with fp64 (fla_kernel_probe exit 1)" -- \
  env FAKE_CUDA=1 FAKE_PROBE_RC=1 bash "$fla_sh" "$stubs/spbench" "$work/f5"
expect fla.all_pass 0 "$(fla_probe fused_recurrent)
$(fla_item f4 32)
$(fla_item f4 4)
fla check: both shapes passed" -- env FAKE_CUDA=1 bash "$fla_sh" "$stubs/spbench" "$work/f4"

if [ "$failed" -ne 0 ]; then echo "check scripts: some cases failed"; exit 1; fi
echo CHECK_SCRIPTS_OK
