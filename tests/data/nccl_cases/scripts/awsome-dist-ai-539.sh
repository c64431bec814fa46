# source: awslabs/awsome-distributed-ai PR #539 (merged) (lines added to 3.test_cases/10.FSDP/1.distributed-training-llama2.sbatch in the review thread by mhuguesaws 2025-01-31 (diff '+' markers removed)) https://github.com/awslabs/awsome-distributed-ai/pull/539
export LD_PRELOAD=/opt/nccl/build/lib/libnccl.so
export export NCCL_SOCKET_IFNAME=^docker,lo,veth_def_agent,eth
