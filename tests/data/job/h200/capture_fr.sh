#!/bin/bash
# Runs on the H200 device machine: real NCCL Flight Recorder dumps (healthy + watchdog timeout), NCCL INFO log, RAS output.
set -u
cd "$(dirname "$0")"
PY=python3
nvidia-smi -L > $OUT/nvidia-smi.txt 2>&1
$PY -c "import torch;print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.is_available())" > $OUT/env.txt 2>&1
ls /usr/bin/ncclras /usr/local/bin/ncclras >> $OUT/env.txt 2>&1
export TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_ENABLE_TIMING=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV
timeout 120 $PY capture_fr.py healthy > $OUT/healthy_stdout.txt 2> $OUT/healthy_stderr.txt; echo "healthy rc=$?" >> $OUT/env.txt
mkdir -p $OUT/timeout
export TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_NCCL_DEBUG_INFO_TEMP_FILE=$OUT/timeout/nccl_trace_rank_ TORCH_NCCL_ASYNC_ERROR_HANDLING=1
timeout 120 $PY capture_fr.py timeout > $OUT/timeout/stdout.txt 2> $OUT/timeout/stderr.txt; echo "timeout rc=$?" >> $OUT/env.txt
ls -la $OUT $OUT/timeout >> $OUT/env.txt
