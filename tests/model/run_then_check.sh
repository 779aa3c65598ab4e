# shellcheck shell=bash disable=SC2154,SC2034  # the words come from the caller's check_item; status is for the caller
# run_then_check.sh: sourced by check_against_torch.sh and check_against_fla.sh, which share the loop of a run of
# `spbench model` writing a dump and a Python reference checking that dump, once per item (a backend, a head count).
#
# run_then_check ITEM...: for each ITEM, with the caller's functions
#   check_item ITEM       sets dump (the dump folder) and the words printed about it: run_words ("== $run_words ->
#                         $dump"), run_failed ("FAIL: $run_failed"), ref_words ("== $ref_words vs $dump"),
#                         ref_failed and ref_name ("FAIL: $ref_failed ($ref_name exit RC)")
#   check_run ITEM DUMP   trains under "${mpirun[@]}" and writes DUMP; non-zero: the run failed (its check is skipped)
#   check_ref ITEM DUMP   checks DUMP; its exit status is the check's
# Sets status: 0 where every run and check passed, else 1.

# One rank; Open MPI refuses root unless told.
mpirun=(mpirun -np 1)
if [ "$(id -u)" -eq 0 ]; then mpirun+=(--allow-run-as-root); fi

run_then_check() {
  local item rc
  status=0
  for item in "$@"; do
    check_item "$item"
    rm -rf "$dump"
    echo "== $run_words -> $dump"
    if ! check_run "$item" "$dump"; then
      echo "FAIL: $run_failed"; status=1; continue
    fi
    echo "== $ref_words vs $dump"
    rc=0
    check_ref "$item" "$dump" || rc=$?
    if [ "$rc" -ne 0 ]; then echo "FAIL: $ref_failed ($ref_name exit $rc)"; status=1; fi
  done
}
