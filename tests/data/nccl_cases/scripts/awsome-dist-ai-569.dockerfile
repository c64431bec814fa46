# source: awslabs/awsome-distributed-ai PR #569 (merged) (lines 126-134 of micro-benchmarks/nccl-tests/nccl-tests.Dockerfile at 67d3fe909248454bf32215230fea482e90351e41, the parent of commit 9636cb16 'Fix exclusion of eth in NCCL tests' by mhuguesaws) https://github.com/awslabs/awsome-distributed-ai/pull/569
## Set Open MPI variables to exclude network interface and conduit.
ENV OMPI_MCA_pml=^cm,ucx            \
    OMPI_MCA_btl=tcp,self           \
    OMPI_MCA_btl_tcp_if_exclude=lo,docker0,veth_def_agent\
    OPAL_PREFIX=/opt/amazon/openmpi \
    NCCL_SOCKET_IFNAME=^docker,lo,veth_def_agent,eth

## Turn off PMIx Error https://github.com/open-mpi/ompi/issues/7516
ENV PMIX_MCA_gds=hash
