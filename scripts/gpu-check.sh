#!/usr/bin/env bash
# GPU check of the PyTorch trainer (trainer/): throughput, memory, MFU, bf16-vs-float32 agreement.
# Needs Python with torch, transformers, peft, accelerate, safetensors; no network, no Node, no install.
#   scripts/gpu-check.sh                 # on a machine with an NVIDIA GPU (under 8 minutes)
#   scripts/gpu-check.sh --quick         # CPU-only self test of this script (tiny model, few hundred tokens)
#   scripts/gpu-check.sh --peak-tflops 400   # a GPU other than H100/H200/A100
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
export PYTHONPATH="$ROOT/trainer${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec "$PYTHON" "$ROOT/scripts/gpu_check.py" --repo "$ROOT" "$@"
