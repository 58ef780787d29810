#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one run on a machine that has one: the GPU tests
# (tests/gpu: the CPU's losses on the GPU, FSDP/DDP over NCCL with bf16, a sharded checkpoint
# resumed and loaded back on the CPU) and the training figures of benchmarks/gpu_training.py.
#
#   bash benchmarks/gpu_check.sh [OUT_DIR]
#
# Where rlctl is not installed (a bare machine with PyTorch), wheels in .whl/ (rlctl's own, built
# with `uv build --all-packages --wheel -o .whl`, and what the machine lacks: cattrs, structlog,
# dependency-injector, and the transformers / tokenizers / huggingface-hub (+ httpx2, httpcore2,
# truststore, hf-xet) versions of uv.lock when the machine's are older) are installed into
# /tmp/site first. A SmolVLM folder from `make_tiny_smolvlm.py OUT --real-size` at .gpu/smolvlm
# adds SmolVLA's real-size figures; RLCTL_SHARED names the LeRobot fixtures (sim_images).
set -u
OUT=${1:-${OUT:-/tmp/rlctl-gpu-check}}
mkdir -p "$OUT"
{
  date -u
  nvidia-smi -L
  lscpu | grep -E "Model name|^CPU\(s\)"
  echo "cpu flags: $(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
} 2>&1 | tee "$OUT/host.txt"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD:$PWD/benchmarks
export RLCTL_PROGRESS=silent PYTHONUNBUFFERED=1
export RLCTL_SHARED=${RLCTL_SHARED:-$PWD/.gpu/shared}
timeout 240 python3 -m pytest tests/gpu -q -p no:cacheprovider -n 0 --timeout 200 -rA 2>&1 \
  | tail -40 | tee "$OUT/tests.log"
vlm=()
[ -d .gpu/smolvlm ] && vlm=(--smolvla-vlm .gpu/smolvlm --smolvla-cpu)
timeout 420 python3 benchmarks/gpu_training.py --pi0-sizes medium real "${vlm[@]}" --timeout 150 \
  2>&1 | tee "$OUT/figures.jsonl"
