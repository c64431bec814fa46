"""NCCL: generate the environment for a node, lint the one a job uses, read NCCL's logs.

Modules: :mod:`~fabricscope.nccl.log` (log line parser), :mod:`~fabricscope.nccl.logstate`
(aggregator), :mod:`~fabricscope.nccl.logfiles` (streaming files), :mod:`~fabricscope.nccl.logreport`
(the report, from :mod:`~fabricscope.nccl.logverdicts` and :mod:`~fabricscope.nccl.logerrors`),
:mod:`~fabricscope.nccl.explain` (what status codes and WARN lines mean), and the
environment tools built on the host inventory.
"""
