# spb_gpu_machine: the name this node's GPUs give result files, as the lent kinds are named: nvidia-<model>-x<GPUs>
# (e.g. nvidia-h200-x4, nvidia-h100-x1), and nvidia-h200 for one H200; $SPB_MACHINE where set. The model is the
# name's first word of a letter and three digits ("NVIDIA H100 80GB HBM3": h100). Sourced by common.sh and
# gpu_session.sh.
spb_gpu_machine() {
  local gpus model name
  gpus=$(nvidia-smi -L | wc -l)
  model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z' 'a-z' | grep -oE '\b[a-z][0-9]{3}\b' | head -1)
  name="nvidia-${model:-gpu}-x${gpus}"
  [ "$name" = nvidia-h200-x1 ] && name=nvidia-h200
  echo "${SPB_MACHINE:-$name}"
}
