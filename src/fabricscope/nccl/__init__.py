"""NCCL: generate the environment for a node, lint the one a job uses, read NCCL's logs.

Modules: :mod:`~fabricscope.nccl.log.parse` (log line parser), :mod:`~fabricscope.nccl.log.aggregate`
(aggregator), :mod:`~fabricscope.nccl.log.read` (streaming files), :mod:`~fabricscope.nccl.log.report`
(the report, from :mod:`~fabricscope.nccl.log.verdicts` and :mod:`~fabricscope.nccl.log.errors`),
:mod:`~fabricscope.nccl.explain` (what status codes and WARN lines mean), and the
environment tools built on the host inventory.
"""
