"""Kubernetes: every generated manifest loads into the official client's typed models (and back,
unchanged, so no field is unknown to the API), the node-problem-detector config obeys NPD's own
validation rules, and taint/label go through a fake CoreV1Api. No API server runs here."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fabricscope.errors import FabricscopeError
from fabricscope.findings import Severity
from fabricscope.fleet.doctor import judge_fleet
from fabricscope.fleet.inputs import expand_sources, load_nodes
from fabricscope.fleet.k8s import failing_nodes, node_actions, parse_label, parse_taint
from tests.conftest import FIXTURE_HOSTS, skip_unless_ci
from tests.fleet.test_cli import fabricscope, one_error_line


@pytest.fixture(scope="module")
def client():
    try:
        import kubernetes.client as client
    except ImportError:
        skip_unless_ci("the kubernetes client is not installed (pip install 'fabricscope[k8s]')")
    return client


def to_model(client, data: dict, kind: str):
    api = client.ApiClient()
    text = json.dumps(data)
    try:
        return api.deserialize(text, kind, "application/json")
    except TypeError:  # clients before the pydantic models: deserialize(response, type)

        class Response:
            def __init__(self, data: str) -> None:
                self.data = data

        return api.deserialize(Response(text), kind)


def round_trip(client, data: dict, kind: str):
    model = to_model(client, data, kind)
    assert client.ApiClient().sanitize_for_serialization(model) == data, (
        f"{kind}: a field the API does not know, or a wrong type"
    )
    return model


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("k8s")
    proc = fabricscope("monitoring", "k8s", "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    assert {Path(f["path"]).name for f in json.loads(proc.stdout)["files"]} == {
        "fabricscope-exporter-daemonset.yaml",
        "fabricscope-npd-plugin.json",
        "fabricscope-npd-configmap.yaml",
    }
    return out


def test_daemonset_is_a_valid_typed_object_with_least_privilege(client, written: Path) -> None:
    data = yaml.safe_load((written / "fabricscope-exporter-daemonset.yaml").read_text())
    ds = round_trip(client, data, "V1DaemonSet")
    pod = ds.spec.template.spec
    assert pod.host_network is True and pod.automount_service_account_token is False
    (container,) = pod.containers
    sc = container.security_context
    assert sc.capabilities.drop == ["ALL"] and sc.capabilities.add == ["NET_ADMIN"]
    assert (
        sc.read_only_root_filesystem is True
        and sc.allow_privilege_escalation is False
        and sc.privileged is False
    )
    assert [(m.mount_path, m.read_only) for m in container.volume_mounts] == [("/sys", True)]
    assert [(v.name, v.host_path.path) for v in pod.volumes] == [("sys", "/sys")]
    assert ds.spec.selector.match_labels == ds.spec.template.metadata.labels
    assert container.command == ["fabricscope"] and container.args[:3] == ["exporter", "--listen", ":9731"]


def test_npd_configmap_and_plugin_follow_npd_rules(client, written: Path) -> None:
    config = json.loads((written / "fabricscope-npd-plugin.json").read_text())
    cm = round_trip(
        client, yaml.safe_load((written / "fabricscope-npd-configmap.yaml").read_text()), "V1ConfigMap"
    )
    assert json.loads(cm.data["fabricscope-plugin.json"]) == config
    # node-problem-detector's CustomPluginConfig.Validate(): plugin "custom"; every permanent rule has a
    # default condition of its type; a rule timeout is within the global timeout.
    assert config["plugin"] == "custom"
    defaults = {c["type"] for c in config["conditions"]}
    seconds = lambda text: int(re.fullmatch(r"(\d+)s", text).group(1))  # noqa: E731
    for rule in config["rules"]:
        assert rule["type"] in ("temporary", "permanent")
        assert rule["type"] != "permanent" or rule["condition"] in defaults
        assert seconds(rule["timeout"]) <= seconds(config["pluginConfig"]["timeout"])
        assert rule["args"] == ["doctor", "--nhc"]


@pytest.mark.parametrize(("host", "status"), [("roce-healthy", 0), ("roce-broken", 1)])
def test_npd_rule_command_speaks_npd_protocol(written: Path, host: str, status: int) -> None:
    """NPD: exit 0 OK, 1 NonOK, 2 Unknown; stdout (cut at max_output_length) is the message."""
    config = json.loads((written / "fabricscope-npd-plugin.json").read_text())
    rule = config["rules"][0]
    proc = subprocess.run(
        [sys.executable, "-m", "fabricscope", *rule["args"], "--root", str(FIXTURE_HOSTS / host)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == status
    assert len(proc.stdout.rstrip("\n")) <= config["pluginConfig"]["max_output_length"]
    assert (proc.stdout == "") == (status == 0)
    bad = subprocess.run(
        [sys.executable, "-m", "fabricscope", *rule["args"], "--root", "/nonexistent"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2  # Unknown


def test_existing_files_are_not_overwritten_silently(written: Path) -> None:
    again = fabricscope("monitoring", "k8s", "-o", str(written))
    assert again.returncode == 0 and again.stdout.count("unchanged") == 3
    assert "differs" in one_error_line(
        fabricscope("monitoring", "k8s", "-o", str(written), "--namespace", "gpu-ops")
    )
    assert "not a valid namespace" in one_error_line(
        fabricscope("monitoring", "k8s", "-o", str(written), "--namespace", "Bad_NS")
    )


class FakeCoreV1:
    """The two CoreV1Api calls the layer makes, against an in-memory Node."""

    def __init__(self, client, nodes: list[str]) -> None:
        self.client = client
        self.nodes = {
            n: to_model(
                client,
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": n, "labels": {}},
                    "spec": {"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]},
                },
                "V1Node",
            )
            for n in nodes
        }
        self.patches: list[tuple[str, dict]] = []

    def read_node(self, name: str):
        return self.nodes[name]

    def patch_node(self, name: str, body: dict):
        to_model(
            self.client, {"apiVersion": "v1", "kind": "Node", **body}, "V1Node"
        )  # the body is a valid (partial) Node
        self.patches.append((name, body))


def test_taint_and_label_failing_nodes_through_the_client_layer(
    client, planted_fleet, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FABRICSCOPE_ACTION_LOG", str(tmp_path / "log"))
    report = judge_fleet(load_nodes(expand_sources([str(planted_fleet[1])])))
    api = FakeCoreV1(client, [f"node-{i:02d}" for i in range(1, 11)])
    logged: list[dict] = []
    dry = node_actions(
        failing_nodes(report, Severity.FAIL),
        taint="fabricscope.io/fabric=bad:NoSchedule",
        label="fabricscope.io/healthy=false",
        apply=False,
        api=api,
        log=logged.append,
    )
    failing = ["node-02", "node-04", "node-05", "node-06", "node-08", "node-09", "node-10"]
    assert (
        [a["node"] for a in dry if a["kind"] == "k8s.taint"] == failing and api.patches == [] and logged == []
    )
    assert dry[0]["command"] == "kubectl taint nodes node-02 fabricscope.io/fabric=bad:NoSchedule --overwrite"
    done = node_actions(
        failing_nodes(report, Severity.FAIL),
        taint="fabricscope.io/fabric=bad:NoSchedule",
        label="fabricscope.io/healthy=false",
        apply=True,
        api=api,
        log=logged.append,
    )
    assert all(a["ok"] for a in done) and len(logged) == len(done) == 14
    node, taint_body = api.patches[0]
    assert node == "node-02" and taint_body == {
        "spec": {
            "taints": [
                {"key": "gpu", "value": "true", "effect": "NoSchedule"},
                {"key": "fabricscope.io/fabric", "value": "bad", "effect": "NoSchedule"},
            ]
        }
    }
    assert api.patches[1] == ("node-02", {"metadata": {"labels": {"fabricscope.io/healthy": "false"}}})


def test_api_errors_are_one_line_per_node(client, planted_fleet) -> None:
    report = judge_fleet(load_nodes(expand_sources([str(planted_fleet[1])])))

    class Refusing(FakeCoreV1):
        def patch_node(self, name: str, body: dict):
            raise client.exceptions.ApiException(status=403, reason="Forbidden")

    actions = node_actions(
        failing_nodes(report, Severity.FAIL),
        taint=None,
        label="a=b",
        apply=True,
        api=Refusing(client, [f"node-{i:02d}" for i in range(1, 11)]),
    )
    assert all(
        a["ok"] is False and a["detail"].startswith("ApiException") and "\n" not in a["detail"]
        for a in actions
    )


@pytest.mark.parametrize(
    "bad",
    [
        "novalue",
        "k=v:Sometimes",
        "bad key=v:NoSchedule",
        "k=v v:NoExecute",
        "-k=v:NoSchedule",
        "x/" + "a" * 70 + "=v:NoSchedule",
    ],
)
def test_bad_taints_are_refused(bad: str) -> None:
    with pytest.raises(FabricscopeError):
        parse_taint(bad)


def test_taint_and_label_syntax() -> None:
    assert parse_taint("fabricscope.io/fabric=bad:NoSchedule") == (
        "fabricscope.io/fabric",
        "bad",
        "NoSchedule",
    )
    assert parse_taint("maintenance:NoExecute") == ("maintenance", "", "NoExecute")
    assert parse_label("fabricscope.io/healthy=false") == ("fabricscope.io/healthy", "false")
    with pytest.raises(FabricscopeError):
        parse_label("nolabel")


def test_cli_dry_run_shows_the_commands(planted_fleet) -> None:
    proc = fabricscope(
        "fleet",
        "doctor",
        "--from",
        str(planted_fleet[1]),
        "--k8s-taint",
        "fabricscope.io/fabric=bad:NoSchedule",
    )
    assert proc.returncode == 1
    assert "(dry run: --apply carries them out)" in proc.stdout
    assert (
        " would run kubectl taint nodes node-05 fabricscope.io/fabric=bad:NoSchedule --overwrite"
        in proc.stdout
    )
    assert "--k8s-taint" in one_error_line(
        fabricscope("fleet", "doctor", "--from", str(planted_fleet[1]), "--k8s-taint", "x=y:Never")
    )
    assert "needs an action" in one_error_line(
        fabricscope("fleet", "doctor", "--from", str(planted_fleet[1]), "--apply")
    )
