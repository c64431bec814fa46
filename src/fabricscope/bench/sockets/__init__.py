"""Socket benchmarks: the control protocol, server and client, TCP/UDP/latency/connect and their worker processes."""
