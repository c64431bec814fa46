"""Merge the aggregators of several NCCL log files into one, in file order.

Each file is read into its own :class:`~fabricscope.nccl.log.aggregate.LogAggregator` -- on one core or
in worker processes (``fabricscope nccl log --jobs``) -- and merged here in the order the files were
given, so the result does not depend on the number of cores. What a file says is kept with the
same caps as when lines are fed (64 HCAs and devices, 256 variables, 256 warning signatures per
report). A thread's ``file:line -> N`` chain is followed within one file: NCCL writes each process
to one file (``NCCL_DEBUG_FILE=nccl.%h.%p.log``) or interleaves whole lines into one.
"""

from __future__ import annotations

from typing import Any

from fabricscope.nccl.log.aggregate import (
    MAX_MESSAGES,
    MAX_WARN_GROUPS,
    LogAggregator,
    ProcessState,
    RankState,
    WarnGroup,
)


def merge(into: LogAggregator, other: LogAggregator) -> None:
    """Add ``other`` (a later file, fully fed and ended) to ``into``. ``other`` is used up."""
    other.flush()
    into.flush()
    into.files.extend(other.files)
    _add_counts(into.events, other.events)
    _add_counts(into.versions, other.versions)
    _add_counts(into.plugin_skips, other.plugin_skips)
    into.info_lines += other.info_lines
    _add_counts(into.fallbacks, other.fallbacks)
    _add_counts(into.excerpts, other.excerpts)
    for mid, count in other.messages.items():
        if mid in into.messages or len(into.messages) < MAX_MESSAGES:
            into.messages[mid] = into.messages.get(mid, 0) + count
    mine_t, later_t = into.torch, other.torch
    mine_t["timeouts"] += later_t["timeouts"]
    for key in ("ops", "api_errors", "messages"):
        _add_counts(mine_t[key], later_t[key])
    if "timeout_ms" in later_t:
        mine_t.setdefault("timeout_ms", later_t["timeout_ms"])
    for key, proc in other.processes.items():
        if key in into.processes:
            _merge_process(into.processes[key], proc)
        else:
            into.processes[key] = proc
    for key, rank in other.ranks.items():
        if key in into.ranks:
            _merge_rank(into.ranks[key], rank)
        else:
            into.ranks[key] = rank
    for gkey, group in other.warn_groups.items():
        _merge_group(into, gkey, group)
    for ckey, chain in other.chains.items():
        mine = into.chains.get(ckey)
        if mine is None:
            into.chains[ckey] = chain
            continue
        mine.count += chain.count
        mine.ranks |= chain.ranks
        mine.recovered_by = mine.recovered_by or chain.recovered_by
        for thread in chain.threads:
            if len(mine.threads) < 8:
                mine.threads.add(thread)


def _add_counts(into: dict[Any, Any], other: dict[Any, Any]) -> None:
    for key, count in other.items():
        into[key] = into.get(key, 0) + count


def _capped_update(into: dict[Any, Any], other: dict[Any, Any], cap: int) -> None:
    """``into.update(other)``, adding new keys only while ``into`` holds fewer than ``cap``."""
    for key, value in other.items():
        if key in into or len(into) < cap:
            into[key] = value


def _merge_process(mine: ProcessState, later: ProcessState) -> None:
    """The same process in a later file: what it says there is newer."""
    mine.version = later.version or mine.version
    mine.network = later.network or mine.network
    mine.net_name = later.net_name or mine.net_name
    if later.net_devices:
        mine.net_devices = later.net_devices
    mine.relaxed_ordering = mine.relaxed_ordering or later.relaxed_ordering
    mine.oob = later.oob or mine.oob
    mine.socket_interfaces = later.socket_interfaces or mine.socket_interfaces
    mine.bootstrap = later.bootstrap or mine.bootstrap
    mine.no_device |= later.no_device
    mine.no_verbs = mine.no_verbs or later.no_verbs
    mine.net_plugin = later.net_plugin or mine.net_plugin
    _capped_update(mine.gdr_hca, later.gdr_hca, 64)
    _capped_update(mine.env, later.env, 256)
    _capped_update(mine.qp_gids, later.qp_gids, 16)


def _merge_rank(mine: RankState, later: RankState) -> None:
    if later.rank_from_nranks > mine.rank_from_nranks:  # a communicator with more ranks names it
        mine.rank, mine.nranks, mine.rank_from_nranks = later.rank, later.nranks, later.rank_from_nranks
        mine.nnodes = later.nnodes if later.nnodes is not None else mine.nnodes
    elif mine.rank is None:
        mine.rank = later.rank
    mine.init_started += later.init_started
    mine.init_completed += later.init_completed
    mine.destroyed += later.destroyed
    mine.aborted += later.aborted
    _add_counts(mine.transports, later.transports)
    _add_counts(mine.tclasses, later.tclasses)
    for dev in sorted(later.net_devs):
        if len(mine.net_devs) < 64:
            mine.net_devs.add(dev)
    mine.ring_gdr = later.ring_gdr if later.ring_gdr is not None else mine.ring_gdr
    _add_counts(mine.warns, later.warns)
    mine.last_result = later.last_result or mine.last_result
    for code, instead in later.recovered.items():
        mine.recovered.setdefault(code, instead)


def _merge_group(into: LogAggregator, gkey: tuple[str, str], group: WarnGroup) -> None:
    mine = into.warn_groups.get(gkey)
    if mine is None:
        if len(into.warn_groups) < MAX_WARN_GROUPS - 1 or gkey == ("warn", "(other warnings)"):
            into.warn_groups[gkey] = group
            return
        other = ("warn", "(other warnings)")
        mine = into.warn_groups.get(other)
        if mine is None:
            group.kind, group.key, group.data = other[0], other[1], dict(group.data)
            into.warn_groups[other] = group
            return
    mine.count += group.count
    mine.ranks |= group.ranks
    mine.hosts |= group.hosts
