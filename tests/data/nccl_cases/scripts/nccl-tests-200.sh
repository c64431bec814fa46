# source: NVIDIA/nccl-tests issue #200 (command in the description by gim4moon; resolution by gim4moon 2024-03-12 after AddyLaddy's questions) https://github.com/NVIDIA/nccl-tests/issues/200
# note: the leading "# " is the root shell prompt the user pasted with the command
# mpirun --allow-run-as-root -np 2 -H host1,host2 -x LD_LIBRARY_PATH -x NCCL_DEBUG=INFO -x NCCL_CUMEM_ENABLE=1 -x NCCL_IB_HCA=mlx5 /nccl-tests/build/all_reduce_perf -b 8 -e 128M -f 2 -g 8
