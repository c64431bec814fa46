"""The registry of doctor checks. A check is a function from a :class:`CheckContext` to
findings; it registers itself with :func:`check`, so adding one is one function in one file."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from fabricscope.findings import Finding, Severity
from fabricscope.host.inventory import CounterSample, Inventory, counter_deltas


@dataclass(frozen=True)
class Rates:
    """Counter increases between two samples taken ``interval_s`` apart."""

    interval_s: float
    ports: dict[str, dict[str, int]]  # "mlx5_0/1" -> counter -> increase
    ethtool: dict[str, dict[str, int]]
    netstat: dict[str, int]
    aer: dict[str, dict[str, int]] = field(default_factory=dict)  # PCI address -> severity -> increase

    @classmethod
    def between(cls, before: CounterSample, after: CounterSample) -> Rates:
        return cls(
            interval_s=max(after.taken_s - before.taken_s, 1e-9),
            ports={k: counter_deltas(before.ports.get(k, {}), v) for k, v in after.ports.items()},
            ethtool={k: counter_deltas(before.ethtool.get(k, {}), v) for k, v in after.ethtool.items()},
            netstat=counter_deltas(before.netstat, after.netstat),
            aer={k: counter_deltas(before.aer.get(k, {}), v) for k, v in after.aer.items()},
        )

    def per_second(self, increase: int) -> float:
        return increase / self.interval_s


@dataclass(frozen=True)
class CheckContext:
    inventory: Inventory
    rates: Rates | None = None  # set when doctor ran with --interval


def not_evaluated(
    check_id: str, subject: str, why: str, evidence: dict | None = None, fix: str | None = None
) -> Finding:
    """What a check says when its inputs are unknown: info, never a pass."""
    return Finding(check_id, Severity.INFO, subject, f"not evaluated: {why}", evidence or {}, fix)


def not_evaluated_where(relevant: object, check_id: str, subject: str, why: str, fix: str) -> list[Finding]:
    """not_evaluated where the node has what the check judges (``relevant``), else nothing: a node
    without GPUs is not told that their tool's output is missing."""
    return [not_evaluated(check_id, subject, why, fix=fix)] if relevant else []


def not_evaluated_on(check_id: str, why: str, names: list[str], key: str, fix: str | None = None) -> Finding:
    """not_evaluated for the named ports or devices whose inputs were unreadable: named in the
    subject, after ``why`` in the message, and under ``key`` in the evidence."""
    return not_evaluated(check_id, ",".join(names), f"{why} " + ", ".join(names), {key: names}, fix)


CheckFunc = Callable[[CheckContext], Iterable[Finding]]


@dataclass(frozen=True)
class CheckSpec:
    id: str  # "rdma.port_state"; findings of this check carry this id
    area: str
    title: str
    description: str  # what it looks at and why; goes into docs/checks.md
    func: CheckFunc = field(repr=False)


REGISTRY: dict[str, CheckSpec] = {}


def check(check_id: str, title: str) -> Callable[[CheckFunc], CheckFunc]:
    """Register a check under ``area.name``; its docstring becomes its documentation."""

    def decorate(func: CheckFunc) -> CheckFunc:
        if check_id in REGISTRY:
            raise ValueError(f"check {check_id} registered twice")
        REGISTRY[check_id] = CheckSpec(
            id=check_id,
            area=check_id.split(".", 1)[0],
            title=title,
            description=" ".join((func.__doc__ or "").split()),
            func=func,
        )
        return func

    return decorate


def all_checks() -> list[CheckSpec]:
    load_builtin_checks()
    return sorted(REGISTRY.values(), key=lambda c: c.id)


def load_builtin_checks() -> None:
    """Import the check modules so they register themselves."""
    from fabricscope.checks import (  # noqa: F401
        aer,
        gpu_fabric,
        kernel_log,
        link,
        nccl_conf,
        nic_config,
        pcie,
        rdma,
        rdma_access,
        roce,
        sources,
        subnet_manager,
        tcp,
    )
