# source: pytorch/pytorch issue #24069 (settings in the description by as754770178; verdict by pietern 2019-08-09 (closed)) https://github.com/pytorch/pytorch/issues/24069
# node1 
export NCCL_SOCKET_IFNAME=ib0
export NCCL_DEBUG=INFO 
export NCCL_DEBUG_SUBSYS=ALL
unset NCCL_IB_DISABLE

init_method="tcp://66.66.66.75:10087"

# node2
export NCCL_SOCKET_IFNAME=ib0
export NCCL_DEBUG=INFO 
export NCCL_DEBUG_SUBSYS=ALL
unset NCCL_IB_DISABLE

init_method="tcp://66.66.66.75:10087"
