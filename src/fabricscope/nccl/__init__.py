"""NCCL: generate the environment for a node, lint the one a job uses, read NCCL's logs.

Modules: :mod:`~fabricscope.nccl.log` (streaming log parser and aggregator),
:mod:`~fabricscope.nccl.explain` (what status codes and WARN lines mean), and the
environment tools built on the host inventory.
"""
