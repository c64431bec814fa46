# source: aws/deep-learning-containers PR #6469 (merged) (ENV block of docker/ray-train/Dockerfile.cuda (lines 129-140) at e968b074cd51ccdfea636200284175271797c950, the parent of the fix commit c8b91e96da; PR by Eren-Jeager123) https://github.com/aws/deep-learning-containers/pull/6469
ENV PYTHONDONTWRITEBYTECODE=1 \
  PYTHONUNBUFFERED=1 \
  PYTHONIOENCODING=UTF-8 \
  LANG=C.UTF-8 \
  LC_ALL=C.UTF-8 \
  DLC_CONTAINER_TYPE=training \
  CUDA_HOME=/usr/local/cuda \
  # EFA/NCCL runtime defaults (NCCL falls back to TCP when EFA is absent).
  FI_PROVIDER=efa \
  FI_LOG_LEVEL=warn \
  NCCL_SOCKET_IFNAME=eth0 \
  NCCL_DEBUG=INFO
