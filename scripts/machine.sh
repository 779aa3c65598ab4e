# spb_gpu_machine: the name this node's GPUs give result files, as the lent kinds are named: nvidia-<model>-x<GPUs>
# (e.g. nvidia-h200-x4); $SPB_MACHINE where set. Sourced by common.sh and gpu_session.sh.
spb_gpu_machine() {
  local gpus model
  gpus=$(nvidia-smi -L | wc -l)
  model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | awk '{print tolower($NF)}')
  echo "${SPB_MACHINE:-nvidia-${model}-x${gpus}}"
}
