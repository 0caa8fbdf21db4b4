#!/usr/bin/env bash
# The hardware check: `rag_bench index` on the CPU with 1 process and with N, and on the GPU when there is one,
# then one table. Installs nothing and reaches no network: run it from the repository root of an installed
# rag-site (`make run` once made .venv and var/), on the machine you mean to measure.
#
#   measure/device_check.sh [TREE]
#
# TREE: the source tree indexed each time (default: the installed Django package's db/, ~3,900 chunks).
# PYTHON (default .venv/bin/python), CORES (default: the usable cores), OUT_DIR (default var/device-check): each
# run's JSON report and log go there. Every run uses its own fresh temporary root; what it indexed is removed.
set -uo pipefail

PYTHON=${PYTHON:-.venv/bin/python}
CORES=${CORES:-$("$PYTHON" -c 'import os; print(len(os.sched_getaffinity(0)))')}
TREE=${1:-$("$PYTHON" -c 'import django, os; print(os.path.join(os.path.dirname(django.__file__), "db"))')}
TREE=$(cd "$TREE" && pwd)
OUT_DIR=${OUT_DIR:-var/device-check}
mkdir -p "$OUT_DIR"
export RAG_ROOT_BASE_DIRS="$(dirname "$TREE")"
HALF=$((CORES / 2 > 1 ? CORES / 2 : 1))
GPU=$("$PYTHON" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)

run() {  # run LABEL BACKEND BATCH_SIZE rag_bench-options...
    local label=$1 backend=$2 batch=$3
    shift 3
    echo "== $label: RAG_EMBEDDING_BACKEND=$backend RAG_EMBED_BATCH_SIZE=$batch rag_bench index $TREE $*" >&2
    if RAG_EMBEDDING_BACKEND=$backend RAG_EMBED_BATCH_SIZE=$batch \
        "$PYTHON" manage.py rag_bench index "$TREE" --json "$@" >"$OUT_DIR/$label.json" 2>"$OUT_DIR/$label.log"; then
        echo "$label" >>"$OUT_DIR/runs"
    else
        echo "   failed: see $OUT_DIR/$label.log" >&2
        tail -5 "$OUT_DIR/$label.log" >&2
    fi
}

: >"$OUT_DIR/runs"
# CPU: one process with every core, then processes sharing the job's vector batches (RAG_WORKER_CONCURRENCY x
# RAG_TORCH_THREADS), on PyTorch and on ONNX Runtime.
run cpu-torch-1x$CORES torch 64 --device cpu --processes 1 --threads "$CORES" --no-raw
if [ "$GPU" = 1 ]; then
    # The GPU: large batches, raw encode too (how far the pipeline is from the encoder), then processes sharing it.
    run gpu-1 torch 512 --device cuda --processes 1 --threads 2
    run gpu-4 torch 512 --device cuda --processes 4 --threads 2 --no-raw
else
    echo "== no GPU visible to PyTorch: the GPU rows are left out" >&2
fi
[ "$HALF" -gt 1 ] && run cpu-torch-${HALF}x2 torch 64 --device cpu --processes "$HALF" --threads 2 --no-raw
run cpu-torch-${CORES}x1 torch 64 --device cpu --processes "$CORES" --threads 1 --no-raw
run cpu-onnx-${CORES}x1 onnx 64 --device cpu --processes "$CORES" --threads 1 --no-raw
if [ "$GPU" = 1 ]; then
    echo "== vectors on the GPU against PyTorch fp32 on the CPU" >&2
    RAG_EMBED_BATCH_SIZE=512 "$PYTHON" manage.py rag_bench vectors "$TREE" --device cuda --count 1000 --json \
        >"$OUT_DIR/vectors.json" 2>"$OUT_DIR/vectors.log" || echo "   vectors: see $OUT_DIR/vectors.log" >&2
fi

"$PYTHON" - "$OUT_DIR" "$CORES" <<'EOF'
import json, os, platform, sys
out, cores = sys.argv[1], sys.argv[2]
labels = [line.strip() for line in open(os.path.join(out, "runs")) if line.strip()]
reports = {label: json.load(open(os.path.join(out, f"{label}.json"))) for label in labels}
base = next((r["index_chunks_per_s"] for label, r in reports.items() if label.startswith("cpu-torch-1x")), None)
print(f"\nrag_bench index on {platform.node()} ({cores} cores)")
print("| run | runs on | processes x threads | chunks | end-to-end chunks/s | vs 1 CPU process | raw encode chunks/s "
      "| s embedding (job's process) | s other | query p50 ms |")
print("|---|---|---|---|---|---|---|---|---|---|")
for label, r in reports.items():
    ratio = f"{r['index_chunks_per_s'] / base:.2f}x" if base else ""
    raw = r["encode_chunks_per_s"] or ""
    print(f"| {label} | {r['runs_on']} | {r['processes']} x {r['threads'] or 'all'} | {r['chunks']} | "
          f"{r['index_chunks_per_s']} | {ratio} | {raw} | {r['index_embed_seconds']} | {r['index_other_seconds']} | "
          f"{r['query_p50_ms']} |")
vectors = os.path.join(out, "vectors.json")
if os.path.exists(vectors) and os.path.getsize(vectors):
    v = json.load(open(vectors))
    print(f"\nGPU vectors ({v['runs_on']}, batch {v['batch_size']}) against CPU fp32 on {v['texts']} chunks: "
          f"cosine min {v['cosine_min']}, mean {v['cosine_mean']} (rule >= 0.999: "
          f"{'met' if v['identity_rule_met'] else 'NOT met'}); raw GPU encode {v['encode_chunks_per_s']} chunks/s")
EOF
