# source: NVIDIA/nccl issue #1478 (wrapper script in the description by shanleo2024 2024-10-15; verdict by sjeaugey 2024-10-15) https://github.com/NVIDIA/nccl/issues/1478
#!/bin/bash

ulimit -n 100000
APP="${@}"

let local_rank=$OMPI_COMM_WORLD_LOCAL_RANK%4
echo $OMPI_COMM_WORLD_LOCAL_RANK
echo ${local_rank}
case ${local_rank} in
[0])
  #export UCX_NET_DEVICES="mlx5_0:1"
  export NCCL_IB_HCA=mlx5_0:1
  numactl --cpunodebind=0 --membind=0 \
  $APP
  ;;
[1])
  #export UCX_NET_DEVICES="mlx5_1:1"
  export NCCL_IB_HCA=mlx5_1:1
  numactl --cpunodebind=1 --membind=1 \
  $APP
  ;;
[2])
  #export UCX_NET_DEVICES="mlx5_2:1"
  export NCCL_IB_HCA=mlx5_2:1
  numactl --cpunodebind=2 --membind=2 \
  $APP
  ;;
[3])
  #export UCX_NET_DEVICES="mlx5_3:1"
  export NCCL_IB_HCA=mlx5_3:1
  numactl --cpunodebind=3 --membind=3 \
  $APP
  ;;
esac
