# The environment of a GPU call (sourced by the dev_*.sh scripts): no NVLink multicast (KINDS.md), OpenMPI as root,
# NCCL's library from its Python wheel (the lent machines have NCCL there), and the sha of the commit the working
# tree came from (the tree arrives without .git; see scripts/gpu_session.sh).
export NCCL_NVLS_ENABLE=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
NCCL_ROOT=${NCCL_ROOT:-$(python3 -c 'import nvidia.nccl, os; print(nvidia.nccl.__path__[0])' 2>/dev/null || true)}
[ -n "$NCCL_ROOT" ] && export LD_LIBRARY_PATH=$NCCL_ROOT/lib:${LD_LIBRARY_PATH:-}
export SPB_GIT_SHA=${SPB_GIT_SHA:-$(cat .deps/git_sha 2>/dev/null || echo unknown)}
