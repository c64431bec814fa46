"""RDMA benchmarks: perftest parsing, ``bench rdma`` and its GPUDirect loopback."""
