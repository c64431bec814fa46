# source: deepspeedai/DeepSpeedExamples issue #845 (the setting in the comment by Nas-Azzam 2025-04-24, offered as the other way to the fix the thread settled on (Rainbowman0 2024-01-09: pick an interface both nodes can use)) https://github.com/deepspeedai/DeepSpeedExamples/issues/845
export NCCL_SOCKET_IFNAME=enp179s0f0,enp1s0        #for node1 enp179s0f0 node2 enp1s0 
