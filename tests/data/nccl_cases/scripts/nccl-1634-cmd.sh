# source: NVIDIA/nccl issue #1634 (command in the description by ycm0k; verdict in the comments (GeofferyGeng)) https://github.com/NVIDIA/nccl/issues/1634
mpirun -np 16 -N 8 \
  --mca btl_tcp_if_include bond0 \
  --mca btl tcp,self \
  -H HGX-H100-04:8,HGX-H100-11:8 \
  -x NCCL_SOCKET_IFNAME=bond0 \
  -x NCCL_DEBUG=INFO \
  -x NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH,TUNING,NET \
  -x NCCL_IB_HCA="mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7,mlx5_8,mlx5_9" \
  -x LD_LIBRARY_PATH \
  /opt/nccl-tests/build/all_reduce_perf -b 8 -e 16G -f 2 -g 1
