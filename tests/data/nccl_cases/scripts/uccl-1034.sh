# source: uccl-project/uccl PR #1034 (merged as a7176a99 "[CI] Set NCCL_SOCKET_IFNAME for GH200 EP latency test", Yang Zhou 2026-07-28; the verdict is the PR description) https://github.com/uccl-project/uccl/pull/1034
# note: the step that launches the two-node test in .github/workflows/uccl-build-test-gh200.yml at a7176a99^ (lines 175-219), before the PR; the PR added export NCCL_SOCKET_IFNAME=<the UCCL_SOCKET_IFNAME value> on each node
          set -uo pipefail

          ssh -o BatchMode=yes gh0 << 'EOF' &
            set -euo pipefail
            active_jobs=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader)

            # abort if there are active jobs on the cluster
            if [ -n "$active_jobs" ]; then
                echo "gh0 node is currently used by processes with PID: $active_jobs"
                exit 1
            fi

            source /home/${{secrets.UCCL_GH200_USER}}/nfs/miniconda3/etc/profile.d/conda.sh
            conda activate uccl-ci-sandbox

            cd /home/${{secrets.UCCL_GH200_USER}}/nfs/uccl-ci-sandbox/ep

            export UCCL_SOCKET_IFNAME=enx3c18a0d51943
            /home/${{secrets.UCCL_GH200_USER}}/nfs/miniconda3/envs/uccl-ci-sandbox/bin/torchrun   --nnodes=2 --nproc_per_node=1   --node_rank=0   --master_addr=${{secrets.UCCL_GH200_HOST0}} --master_port=29501   bench/test_low_latency.py   --num-tokens=32 --hidden=7168 --num-topk=8 --num-experts=16
          EOF
          PID_SERVER=$!

          sleep 2
          echo "Started test on server..."

          ssh -o BatchMode=yes gh1 << 'EOF' &
            set -euo pipefail
            active_jobs=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader)

            # abort if there are active jobs on the cluster
            if [ -n "$active_jobs" ]; then
                echo "gh1 node is currently used by processes with PID: $active_jobs"
                exit 1
            fi

            source /home/${{secrets.UCCL_GH200_USER}}/nfs/miniconda3/etc/profile.d/conda.sh
            conda activate uccl-ci-sandbox

            cd /home/${{secrets.UCCL_GH200_USER}}/nfs/uccl-ci-sandbox/ep
            export UCCL_SOCKET_IFNAME=enxc8a36290119d

            /home/${{secrets.UCCL_GH200_USER}}/nfs/miniconda3/envs/uccl-ci-sandbox/bin/torchrun --nnodes=2 --nproc_per_node=1   --node_rank=1   --master_addr=${{secrets.UCCL_GH200_HOST0}} --master_port=29501   bench/test_low_latency.py   --num-tokens=32 --hidden=7168 --num-topk=8 --num-experts=16
          EOF
          PID_CLIENT=$!

