# source: NVIDIA/nccl issue #1141 (~/.bashrc lines in the comment by Rainbowman0 2024-01-09 (the fix that worked)) https://github.com/NVIDIA/nccl/issues/1141
export NCCL_IB_DISABLE=1
export NCCL_SOCKET_IFNAME=br01
export NCCL_P2P_DISABLE=1
export NCCL_DEBUG=INFO
