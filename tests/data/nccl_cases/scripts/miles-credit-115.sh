# source: NCAR/miles-credit PR #115 (merged; "Fix `NCLL_NET_GDR_LEVEL` environment variable in `credit.pbs.py`", commit 503c559a "Fix nccl env variables in launch script" by Arnold Kazadi) https://github.com/NCAR/miles-credit/pull/115
# note: the environment block of the PBS script template (an f-string) in credit/pbs.py at 3227a572^1, the parent of the merge; the PR changed only NCCL_NET_GDR_LEVEL=PBH to PHB
    # Export environment variables
    export LSCRATCH=/glade/derecho/scratch/{user}/
    export LOGLEVEL=INFO
    export NCCL_DEBUG=INFO

    export CUDA_VISIBLE_DEVICES={cuda_devices}

    export NCCL_SOCKET_IFNAME=hsn
    export MPICH_GPU_MANAGED_MEMORY_SUPPORT_ENABLED=1
    export MPICH_OFI_NIC_POLICY=GPU
    export MPICH_GPU_SUPPORT_ENABLED=1

    export NCCL_IB_DISABLE=1
    export NCCL_CROSS_NIC=1
    export NCCL_NCHANNELS_PER_NET_PEER=4

    export MPICH_RDMA_ENABLED_CUDA=1
    export NCCL_NET="AWS Libfabric"
    export NCCL_NET_GDR_LEVEL=PBH

    export FI_CXI_DISABLE_HOST_REGISTER=1
    export FI_CXI_OPTIMIZED_MRS=false
    export FI_MR_CACHE_MONITOR=userfaultfd
    export FI_CXI_DEFAULT_CQ_SIZE=131072
