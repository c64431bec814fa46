"""`fabricscope monitoring k8s -o DIR`: the exporter DaemonSet and the node-problem-detector plugin."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from fabricscope.cli.common import JSON_OPTION, die, print_json
from fabricscope.cli.exporter import monitoring_app


@monitoring_app.command("k8s")
def k8s(
    out: Path = typer.Option(..., "-o", "--out", help="Directory to write the manifests into."),
    namespace: str = typer.Option("monitoring", "--namespace", help="Namespace of the exporter DaemonSet."),
    npd_namespace: str = typer.Option(
        "kube-system", "--npd-namespace", help="Namespace where node-problem-detector runs."
    ),
    image: str = typer.Option(
        None, "--image", help="Container image with fabricscope (default fabricscope:VERSION)."
    ),
    fabricscope_path: str = typer.Option(
        "/usr/local/bin/fabricscope",
        "--fabricscope-path",
        help="Where node-problem-detector finds the fabricscope command.",
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite files that differ."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Write a DaemonSet for the exporter (hostNetwork, /sys read-only, only NET_ADMIN) and a
    node-problem-detector custom-plugin config that runs `doctor --nhc` (docs/fleet.md)."""
    import yaml

    from fabricscope.fleet.collect import write_atomic
    from fabricscope.fleet.k8s import check_node_name
    from fabricscope.monitor.k8s import manifests

    for value, what in ((namespace, "--namespace"), (npd_namespace, "--npd-namespace")):
        try:
            check_node_name(value)  # a namespace is an RFC 1123 label, which this accepts too
        except Exception:
            die(f"{what} {value!r} is not a valid namespace name")
    written = []
    for name, (kind, content) in manifests(namespace, npd_namespace, image, fabricscope_path).items():
        text = (
            json.dumps(content, indent=2) + "\n"
            if kind == "json"
            else yaml.safe_dump(content, sort_keys=False)
        )
        path = out / name
        status = "written"
        if path.exists():
            if path.read_text(encoding="utf-8", errors="replace") == text:
                status = "unchanged"
            elif not force:
                die(f"{path} exists and differs (use --force to overwrite)")
            else:
                status = "replaced"
        if status != "unchanged":
            try:
                write_atomic(path, text.encode("utf-8"))
            except OSError as exc:
                die(f"cannot write {path}: {exc.strerror or exc}")
        written.append({"path": str(path), "status": status})
    if json_out:
        print_json({"schema": "fabricscope.k8s_manifests/v1", "files": written})
        return
    for item in written:
        typer.echo(f"{item['status']:<9} {item['path']}")
    typer.echo(
        "kubectl apply -f the DaemonSet and ConfigMap; docs/fleet.md says how node-problem-detector loads the plugin."
    )
