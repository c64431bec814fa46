"""`fleet baseline`: the manifest a healthy fleet meets, from the majority of its nodes."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Hashable, Iterable
from typing import Any

from fabricscope.fleet.inputs import NodeDoc


def _majority(values: Iterable[Hashable]) -> tuple[Any, int, int] | None:
    """(value, how many have it, how many have any) over the values that are known."""
    counts = Counter(v for v in values if v is not None)
    if not counts:
        return None
    value, n = sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))[0]
    return value, n, sum(counts.values())


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"{value:g}" if isinstance(value, float) else str(value)
    return json.dumps(str(value))  # a JSON string is a valid YAML double-quoted scalar


def _ecn_on(port: dict[str, Any]) -> bool | None:
    ecn, pfc = port.get("ecn_priorities"), port.get("pfc_priorities")
    if ecn is None or not pfc:
        return None
    return all(p in ecn for p in pfc)


Candidate = tuple[str, str, tuple[Any, int, int] | None]  # (section, key, majority)


def _firmware(facts: list[dict[str, Any]]) -> list[Candidate]:
    """The firmware most NICs of each model run (a model's NICs are compared with each other only)."""
    nics = [n for f in facts for n in f.get("nics") or []]
    models = sorted({str(n.get("model")) for n in nics if n.get("model")})
    return [
        ("firmware", model, _majority(n.get("fw") for n in nics if str(n.get("model")) == model))
        for model in models
    ]


def _roce(roce: list[dict[str, Any]]) -> list[Candidate]:
    """MTU, PFC priorities and ECN of the RoCE ports; nothing where the fleet has none."""
    if not roce:
        return []
    pfc = _majority(tuple(p["pfc_priorities"]) if p.get("pfc_priorities") is not None else None for p in roce)
    return [
        ("", "mtu", _majority(p.get("mtu_bytes") for p in roce)),
        (
            "",
            "pfc_priority",
            (list(pfc[0]) if len(pfc[0]) != 1 else pfc[0][0], pfc[1], pfc[2]) if pfc and pfc[0] else None,
        ),
        ("", "ecn", _majority(_ecn_on(p) for p in roce)),
    ]


def baseline_entries(nodes: list[NodeDoc]) -> list[tuple[str, str, Any, tuple[int, int]]]:
    """(section, key, value, (agreeing, compared)) for every manifest entry the fleet has a majority for."""
    facts = [n.facts for n in nodes if n.facts is not None]
    ports = [(nic, p) for f in facts for nic in f.get("nics") or [] for p in nic.get("ports") or []]
    gdr = _majority(
        (f.get("gpus") or {}).get("gpudirect_module") for f in facts if (f.get("gpus") or {}).get("count")
    )
    candidates: list[Candidate] = [
        ("gpus", "count", _majority((f.get("gpus") or {}).get("count") for f in facts)),
        ("gpus", "model", _majority((f.get("gpus") or {}).get("model") for f in facts)),
        (
            "rdma",
            "ports",
            _majority(
                sum(
                    1 for n in f.get("nics") or [] for p in n.get("ports") or [] if p.get("state") == "ACTIVE"
                )
                for f in facts
                if f.get("nics")
            ),
        ),
        ("rdma", "link_layer", _majority(p.get("link_layer") for _n, p in ports)),
        ("rdma", "rate_gbps", _majority(p.get("rate_gbps") for _n, p in ports if p.get("state") == "ACTIVE")),
        *_firmware(facts),
        *_roce([p for _n, p in ports if p.get("link_layer") == "Ethernet"]),
        ("", "gpudirect", (gdr[0] != "none", gdr[1], gdr[2]) if gdr else None),
    ]
    return [(section, key, m[0], (m[1], m[2])) for section, key, m in candidates if m is not None]


def baseline_yaml(nodes: list[NodeDoc], generated: float | None = None) -> str:
    """The manifest text: each entry with how many of the nodes compared agree with it."""
    entries = baseline_entries(nodes)
    day = time.strftime("%Y-%m-%d", time.gmtime(generated or time.time()))
    lines = [
        f"# fabricscope expected-hardware manifest: the majority of {len(nodes)} node(s), {day}.",
        "# Each entry says how many of those that show the fact (nodes, or ports and NICs) agree. Review it, then check nodes with",
        "#   fabricscope doctor --expect THIS_FILE      or      fabricscope fleet doctor --from DIR --expect THIS_FILE",
    ]
    section = None
    for sec, key, value, (agree, compared) in entries:
        if sec != section and sec:
            lines.append(f"{sec}:")
        section = sec
        indent = "  " if sec else ""
        text = "[" + ", ".join(_scalar(v) for v in value) + "]" if isinstance(value, list) else _scalar(value)
        name = _scalar(key) if sec == "firmware" else key
        lines.append(f"{indent}{name}: {text}  # {agree} of {compared}")
    return "\n".join(lines) + "\n"
