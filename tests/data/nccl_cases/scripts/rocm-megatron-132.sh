# source: ROCm/Megatron-LM PR #132 (merged) (line 13 of examples/qwen/train_qwen2.sh as quoted in the description by mcheepa-prof) https://github.com/ROCm/Megatron-LM/pull/132
export NCCL_IB_HCA=rdma0,rdma1,rdma2,rdma3,rdma4,rdma5,rdma6,rdma7
