"""The Kubernetes calls of `fleet doctor --k8s-taint/--k8s-label`, and nothing else.

A thin, reviewed layer over the official ``kubernetes`` client (the ``k8s`` extra): read a Node,
patch its taints or labels. The API object is injected (tests pass a fake; `--apply` builds a
CoreV1Api from the in-cluster service account or ~/.kube/config). Node names, taint and label
keys and values are validated with full matches before anything is sent. Not run against a real
API server in this project's tests: docs/fleet.md says what was and was not verified.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.findings import Severity

K8S_MISSING = "Kubernetes actions need the official client: pip install 'fabricscope[k8s]'"
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# Label/taint key: optional DNS-subdomain prefix and '/', then a name of 1-63 alphanumerics, '-', '_', '.'.
_NAME = r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*"
_KEY = re.compile(rf"({_PREFIX}/)?{_NAME}")
_VALUE = re.compile(rf"({_NAME})?")
_NODE = re.compile(_PREFIX)  # RFC 1123 subdomain


def _check_key_value(key: str, value: str, what: str) -> None:
    if not _KEY.fullmatch(key) or len(key.split("/")[0]) > 253:
        raise FabricscopeError(
            f"{what}: {key[:80]!r} is not a valid key (prefix/name, name of 1-63 letters, digits, '-', '_', '.')"
        )
    if not _VALUE.fullmatch(value):
        raise FabricscopeError(
            f"{what}: {value[:80]!r} is not a valid value (up to 63 letters, digits, '-', '_', '.')"
        )


def parse_taint(text: str) -> tuple[str, str, str]:
    """``KEY=VALUE:EFFECT`` (or ``KEY:EFFECT``) as kubectl taint reads it."""
    spec, sep, effect = text.rpartition(":")
    if not sep or effect not in EFFECTS:
        raise FabricscopeError(
            f"--k8s-taint {text[:80]!r}: expected KEY=VALUE:EFFECT, EFFECT one of {', '.join(EFFECTS)}"
        )
    key, _eq, value = spec.partition("=")
    _check_key_value(key, value, "--k8s-taint")
    return key, value, effect


def parse_label(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq:
        raise FabricscopeError(f"--k8s-label {text[:80]!r}: expected KEY=VALUE")
    _check_key_value(key, value, "--k8s-label")
    return key, value


def check_node_name(name: str) -> str:
    if len(name) > 253 or not _NODE.fullmatch(name):
        raise FabricscopeError(
            f"node name {name[:80]!r} is not a Kubernetes node name (RFC 1123: lower-case letters, digits, '-', '.')"
        )
    return name


def default_api() -> Any:
    """CoreV1Api from the in-cluster service account, else the kubeconfig."""
    try:
        from kubernetes import client, config
    except ImportError:
        raise FabricscopeError(K8S_MISSING) from None
    try:
        config.load_incluster_config()
    except config.ConfigException:
        try:
            config.load_kube_config()
        except (config.ConfigException, OSError) as exc:
            raise FabricscopeError(f"no Kubernetes credentials (in-cluster or kubeconfig): {exc}") from None
    return client.CoreV1Api()


def taint_node(api: Any, node: str, key: str, value: str, effect: str) -> None:
    """Add (or replace) the taint with this key and effect, keeping the node's other taints."""
    current = api.read_node(check_node_name(node))
    taints = [t for t in (current.spec.taints or []) if not (t.key == key and t.effect == effect)]
    body = [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints]
    body.append({"key": key, "value": value or None, "effect": effect})
    api.patch_node(node, {"spec": {"taints": body}})


def label_node(api: Any, node: str, key: str, value: str) -> None:
    api.patch_node(check_node_name(node), {"metadata": {"labels": {key: value}}})


def failing_nodes(report: Any, threshold: Severity) -> list[str]:
    """The nodes of a fleet report with a finding at or above ``threshold``: those to taint or label."""
    return [n.name for n in report.nodes if any(f.severity.rank >= threshold.rank for f in n.all_findings)]


def node_actions(
    failing: list[str],
    *,
    taint: str | None,
    label: str | None,
    apply: bool,
    api: Any = None,
    log: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Taint and/or label the named nodes (``fabricscope ready``'s bad nodes, fleet's failing ones)."""
    parsed_taint = parse_taint(taint) if taint else None
    parsed_label = parse_label(label) if label else None
    actions = []
    for node in failing:
        check_node_name(node)
        if parsed_taint:
            key, value, effect = parsed_taint
            spec = f"{key}={value}:{effect}" if value else f"{key}:{effect}"
            actions.append(
                {
                    "kind": "k8s.taint",
                    "node": node,
                    "command": shlex.join(["kubectl", "taint", "nodes", node, spec, "--overwrite"]),
                    "applied": False,
                    "ok": None,
                    "detail": "",
                }
            )
        if parsed_label:
            key, value = parsed_label
            actions.append(
                {
                    "kind": "k8s.label",
                    "node": node,
                    "command": shlex.join(
                        ["kubectl", "label", "nodes", node, f"{key}={value}", "--overwrite"]
                    ),
                    "applied": False,
                    "ok": None,
                    "detail": "",
                }
            )
    if apply and actions:
        api = api if api is not None else default_api()
        for action in actions:
            try:
                if action["kind"] == "k8s.taint":
                    taint_node(api, action["node"], *parsed_taint)  # type: ignore[misc]
                else:
                    label_node(api, action["node"], *parsed_label)  # type: ignore[misc]
                action.update(applied=True, ok=True)
            except FabricscopeError:
                raise
            except Exception as exc:  # the client raises ApiException, urllib3 errors, ...: one line per node
                action.update(
                    applied=True,
                    ok=False,
                    detail=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}",
                )
            if log is not None:
                log(action)
    return actions
