# source: NVIDIA/nccl-tests issue #219 (command in the description by Assassin187; verdict by AddyLaddy 2024-05-31 and the reporter's fix the same day) https://github.com/NVIDIA/nccl-tests/issues/219
mpirun -np 2 -pernode --allow-run-as-root -hostfile host.txt -mca btl_tcp_if_include 192.168.0.0/24 -x NCCL_SOCKET_IFNAME=enp6s0 ./nccl-tests/build/all_reduce_perf -b 8 -e 128M -f 2 -g 2 -c 0
