#!/usr/bin/env bash
# rank_dies.sh MPIRUN... -- SPBENCH: start a long multi-rank run, kill -9 one rank in the middle, and require the whole
# job to end within 60 s with a non-zero status (no rank may wait forever for the dead one).
set -u
cmd=("$@")
"${cmd[@]}" > /tmp/spb_rank_dies.$$ 2>&1 &
job=$!
victim=""
for _ in $(seq 1 100); do  # wait until the ranks are up (and busy)
  victim=$(pgrep -f "^[^ ]*/spbench operator .*--seed ${SPB_DIES_SEED:-424242}" | sed -n 2p)
  [ -n "$victim" ] && grep -q "spbench operator" /tmp/spb_rank_dies.$$ && break
  sleep 0.2
done
[ -n "$victim" ] && [ "$victim" != "$job" ] || { echo "FAIL: no second rank found"; cat /tmp/spb_rank_dies.$$; kill -9 $job; exit 1; }
sleep 1
kill -9 "$victim"
for _ in $(seq 1 300); do
  if ! kill -0 $job 2>/dev/null; then
    wait $job; rc=$?
    echo "the job (mpirun pid $job) ended with status $rc after rank pid $victim was killed; its last words:"
    tail -4 /tmp/spb_rank_dies.$$
    rm -f /tmp/spb_rank_dies.$$
    [ "$rc" -ne 0 ] || { echo "FAIL: exit status 0"; exit 1; }
    exit 0
  fi
  sleep 0.2
done
echo "FAIL: the job still runs 60 s after a rank died"; cat /tmp/spb_rank_dies.$$
pkill -9 -f "^[^ ]*/spbench operator .*--seed ${SPB_DIES_SEED:-424242}"; kill -9 $job; exit 1
