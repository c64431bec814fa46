"""The host model: the only code that reads the machine (sysfs, procfs, commands), always
through one :class:`Root` (the live ``/`` or a snapshot). Standard library only."""

from fabricscope.host.inventory import Inventory, read_counter_sample, read_inventory
from fabricscope.host.root import CommandResult, Problem, Root, RootError

__all__ = [
    "CommandResult",
    "Inventory",
    "Problem",
    "Root",
    "RootError",
    "read_counter_sample",
    "read_inventory",
]
