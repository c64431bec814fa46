"""Checking a node's facts against the expected-hardware manifest (`--expect`).

Every manifest entry gives ``expect.*`` findings: a pass when the node meets it, a fail naming the
manifest line when the node has less or something different, a warning when the node does not
show the fact at all (it cannot be verified).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fabricscope.findings import Finding, Severity
from fabricscope.fleet.inputs import NodeDoc
from fabricscope.fleet.manifest import Manifest


def _finding(
    m: Manifest,
    check: str,
    ok: bool | None,
    subject: str,
    found: str,
    expected: Any,
    path: tuple[str, ...],
    fix: str,
) -> Finding:
    where = m.where(*path)
    evidence = {"manifest": m.path, "line": m.lines.get(path), "expected": expected, "found": found}
    if ok is None:
        return Finding(
            check,
            Severity.WARN,
            subject,
            f"cannot verify: {found} (expected by {where})",
            evidence,
            "make the fact visible (see docs/fleet.md) or drop the entry from the manifest",
        )
    if ok:
        return Finding(
            check,
            Severity.PASS,
            subject,
            f"{found} as {where}",
            {"manifest": m.path, "line": m.lines.get(path)},
        )
    return Finding(check, Severity.FAIL, subject, f"{found}, breaks {where}", evidence, fix)


def _ports(facts: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(nic, port) for nic in facts.get("nics") or [] for port in nic.get("ports") or []]


def _gpus(m: Manifest, facts: dict[str, Any]) -> Iterator[Finding]:
    spec, gpus = m.spec.gpus, facts.get("gpus") or {}
    if spec is None:
        return
    if spec.count is not None:
        count = gpus.get("count")
        yield _finding(
            m,
            "expect.gpus",
            count == spec.count,
            "GPUs",
            f"{count} GPU(s)",
            spec.count,
            ("gpus", "count"),
            "find the missing GPU: `nvidia-smi`, `lspci -d 10de:`, `dmesg | grep -i xid`",
        )
    if spec.model is not None:
        models = sorted({d.get("model") for d in gpus.get("devices") or [] if d.get("model")})
        ok = None if not models else models == [spec.model]
        yield _finding(
            m,
            "expect.gpus",
            ok,
            "GPUs",
            f"model {', '.join(models) or 'not visible (no nvidia-smi)'}",
            spec.model,
            ("gpus", "model"),
            "this node has other GPUs than the manifest says: move it to its own manifest or replace them",
        )


def _rdma(m: Manifest, facts: dict[str, Any]) -> Iterator[Finding]:
    spec = m.spec.rdma
    if spec is None:
        return
    ports = _ports(facts)
    if spec.ports is not None:
        active = [f"{n.get('device')}/{p.get('port')}" for n, p in ports if p.get("state") == "ACTIVE"]
        inactive = [
            f"{n.get('device')}/{p.get('port')} {p.get('state')}"
            for n, p in ports
            if p.get("state") != "ACTIVE"
        ]
        found = f"{len(active)} active RDMA port(s)" + (f" ({', '.join(inactive)})" if inactive else "")
        yield _finding(
            m,
            "expect.rdma",
            len(active) == spec.ports,
            "RDMA ports",
            found,
            spec.ports,
            ("rdma", "ports"),
            "bring the down port up (cable, switch port, `ibstat`) or find the missing NIC (`lspci -d 15b3:`)",
        )
    for nic, port in ports:
        name = f"{nic.get('device')}/{port.get('port')}"
        if spec.link_layer is not None:
            layer = port.get("link_layer")
            yield _finding(
                m,
                "expect.rdma",
                None if layer is None else layer == spec.link_layer,
                name,
                f"link layer {layer}",
                spec.link_layer,
                ("rdma", "link_layer"),
                f"set the port type: mlxconfig -d {nic.get('device')} set LINK_TYPE_P{port.get('port')}=...",
            )
        if spec.rate_gbps is not None and port.get("state") == "ACTIVE":
            rate = port.get("rate_gbps")
            yield _finding(
                m,
                "expect.rdma",
                None if rate is None else rate == spec.rate_gbps,
                name,
                f"{rate:g} Gb/s" if rate else "rate unknown",
                spec.rate_gbps,
                ("rdma", "rate_gbps"),
                f"check the cable, transceiver and switch port of {name} (`mlxlink -d {nic.get('device')} -m`)",
            )


def _firmware(m: Manifest, facts: dict[str, Any]) -> Iterator[Finding]:
    for nic in facts.get("nics") or []:
        expected = (m.spec.firmware or {}).get(str(nic.get("model")))
        if expected is None:
            continue
        fw = nic.get("fw")
        yield _finding(
            m,
            "expect.firmware",
            None if fw is None else fw == expected,
            str(nic.get("device")),
            f"{nic.get('model')} firmware {fw}",
            expected,
            ("firmware", str(nic.get("model"))),
            f"flash firmware {expected} (mlxfwmanager -u), then mlxfwreset",
        )


def _roce(m: Manifest, facts: dict[str, Any]) -> Iterator[Finding]:
    spec = m.spec
    pfc = spec.pfc_list
    for nic, port in _ports(facts):
        if port.get("link_layer") != "Ethernet":
            continue
        netdev = port.get("netdev") or f"{nic.get('device')}/{port.get('port')}"
        if spec.mtu is not None:
            mtu = port.get("mtu_bytes")
            yield _finding(
                m,
                "expect.mtu",
                None if mtu is None else mtu == spec.mtu,
                netdev,
                f"MTU {mtu}",
                spec.mtu,
                ("mtu",),
                f"ip link set dev {netdev} mtu {spec.mtu}",
            )
        prios = port.get("pfc_priorities")
        if pfc is not None:
            text = ",".join(map(str, prios)) if prios else "none"
            yield _finding(
                m,
                "expect.pfc",
                None if prios is None else sorted(prios) == pfc,
                netdev,
                f"PFC on priority {text}",
                pfc,
                ("pfc_priority",),
                f"mlnx_qos -i {netdev} --pfc {','.join('1' if p in pfc else '0' for p in range(8))}",
            )
        if spec.ecn is not None:
            ecn = port.get("ecn_priorities")
            on = pfc or prios or []
            ok = None if ecn is None or not on else all((p in ecn) == spec.ecn for p in on)
            found = (
                "ECN state not visible"
                if ecn is None
                else f"ECN on priority {','.join(map(str, ecn)) or 'none'}"
            )
            yield _finding(
                m,
                "expect.ecn",
                ok,
                netdev,
                found,
                spec.ecn,
                ("ecn",),
                "; ".join(
                    f"echo {int(spec.ecn)} > /sys/class/net/{netdev}/ecn/roce_{pt}/enable/{p}"
                    for p in on
                    for pt in ("np", "rp")
                ),
            )


def _gpudirect(m: Manifest, facts: dict[str, Any]) -> Iterator[Finding]:
    want = m.spec.gpudirect
    if want is None:
        return
    module = (facts.get("gpus") or {}).get("gpudirect_module")
    if module is None:
        ok = None
    elif isinstance(want, str):
        ok = module == want
    else:
        ok = (module != "none") == want
    yield _finding(
        m,
        "expect.gpudirect",
        ok,
        "kernel modules",
        f"GPUDirect module {module or 'unknown'}",
        want,
        ("gpudirect",),
        f"modprobe {want if isinstance(want, str) else 'nvidia_peermem'} and list it in /etc/modules-load.d/",
    )


def check_manifest(manifest: Manifest, facts: dict[str, Any] | None) -> list[Finding]:
    """Every manifest entry against one node's facts."""
    if facts is None:
        return [
            Finding(
                "expect.input",
                Severity.WARN,
                "facts",
                f"node carries no facts: {manifest.path} not checked",
                {},
                "re-run `fabricscope doctor --json` on the node with this fabricscope",
            )
        ]
    out: list[Finding] = []
    for part in (_gpus, _rdma, _firmware, _roce, _gpudirect):
        out.extend(part(manifest, facts))
    return out


def apply_manifest(manifest: Manifest, nodes: list[NodeDoc]) -> None:
    """Add the manifest findings to every node (fleet doctor --expect)."""
    for node in nodes:
        if "fleet.input" in node.checks and node.facts is None:
            continue
        for finding in check_manifest(manifest, node.facts):
            if finding.severity is not Severity.PASS:
                node.extra.append(finding)
            seen = node.checks.get(finding.id)
            if seen is None or Severity(seen).rank < finding.severity.rank:
                node.checks[finding.id] = finding.severity.value
