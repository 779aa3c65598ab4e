#!/usr/bin/env bash
# The model level on this node's GPUs (the paper's Tables 5 and 6): GLA-1B (20 layers, hidden 2048, vocab 32000)
# training steps at 16384 and 32768 tokens per GPU, with the paper's 32 heads and with the 4 heads of GLA's public
# configuration, on P = 1, 2, 4, ... GPUs; every method where P > 1 (at P = 1 every method is the single-device model,
# so dp and zeco alone). The paper's protocol: 5 warm-up steps, the mean of 100. zeco's All-Scan blocks hold 16384
# elements, as the paper's. A configuration that does not fit retries with --recompute=elementwise, then with
# --recompute=states+elementwise (the least memory), and is counted as skipped if it still does not (the last line counts the configurations: exit 1 where
# one failed; SIGINT or SIGTERM stops the sweep and its ranks at once, exit 130 or 143). Environment: SPB_MODEL_LENGTHS, SPB_MODEL_HEADS, SPB_MODEL_STEPS,
# SPB_MODEL_WARMUP override the defaults; SPB_MODEL_METHODS replaces `all` at P > 1; SPB_MODEL_ARGS is added to every
# run (e.g. "--no-grad-overlap", or "--overlap 2").
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
spb_gpu_sweep model
configs=()
for L in ${SPB_MODEL_LENGTHS:-16384 32768}; do
  for H in ${SPB_MODEL_HEADS:-32 4}; do for P in "${worlds[@]}"; do configs+=("$P $L $H"); done; done
done
spb_sweep_begin
i=0
for c in "${configs[@]}"; do
  read -r P L H <<<"$c"
  i=$((i + 1))
  methods=${SPB_MODEL_METHODS:-all}; [ "$P" -eq 1 ] && methods=dp,zeco
  K=$(( 1024 * (2048 / H) / 16384 )); [ "$K" -ge 1 ] || K=1  # B*H*dk*dv / 16384 with dk = 1024/H, dv = 2048/H
  spb_log "[$i/${#configs[@]}] GLA-1B, $H heads, $L tokens per GPU, $P GPUs: $methods"
  before=$(spb_rows "$csv") rc=0
  for recompute in "" --recompute=elementwise --recompute=states+elementwise; do
    rc=0
    spb_attempt '^ |^# GLA|first step|skipped|wrong results: [1-9]|error|step [0-9]+/' \
      mpirun -np "$P" --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x SPB_GIT_SHA "$SPB" model \
      --backend gpu -m "$methods" -H "$H" -L "$L" -K "$K" $recompute -w "${SPB_MODEL_WARMUP:-5}" \
      -n "${SPB_MODEL_STEPS:-100}" --log-every 25 --csv "$csv" ${SPB_MODEL_ARGS:-} || rc=$?
    grep -q "try --recompute" "$SPB_CONFIG_LOG" || break
  done
  if grep -q "the model needs about" "$SPB_CONFIG_LOG"; then
    SPB_N_SKIPPED=$((SPB_N_SKIPPED + 1))
    spb_log "skipped: does not fit this GPU's memory even with --recompute=states+elementwise"
  else
    spb_tally "$rc" "$csv" "$before"
  fi
done
spb_log "rows in $csv"
spb_sweep_end
