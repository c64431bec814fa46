"""Kubernetes manifests for fabricscope: the exporter as a DaemonSet, and a node-problem-detector
custom-plugin configuration that runs `doctor` on every node.

The DaemonSet runs `fabricscope exporter` on the node's network (hostNetwork: the pod sees the
node's interfaces, RDMA devices and /proc/net), with the node's /sys mounted read-only and the
container's /proc (the node's network namespace under hostNetwork; /proc/sys read-only as every
runtime mounts it), a read-only root filesystem, no privilege escalation, every capability dropped
except NET_ADMIN, which `ethtool -m` needs to read transceiver data (the kernel allows ETHTOOL_GSTATS
and ETHTOOL_GFEATURES to anyone, not ETHTOOL_GMODULEEEPROM: net/ethtool/ioctl.c), and no API token.

node-problem-detector's custom plugin protocol (pkg/custompluginmonitor/types): exit 0 is OK, 1
NonOK, 2 Unknown, the first max_output_length bytes of stdout are the condition's message; a
permanent rule needs a default condition of its type and a timeout within the global one. `doctor
--nhc` prints one line and exits 0/1/2, which is exactly that.
"""

from __future__ import annotations

import json
from typing import Any

from fabricscope import __version__

EXPORTER_PORT = 9731
NPD_CONDITION = "FabricProblem"


def exporter_daemonset(namespace: str, image: str) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "fabricscope-exporter"}
    container = {
        "name": "exporter",
        "image": image,
        "command": ["fabricscope"],
        "args": ["exporter", "--listen", f":{EXPORTER_PORT}", "--doctor-interval", "300"],
        "ports": [
            {"name": "metrics", "containerPort": EXPORTER_PORT, "hostPort": EXPORTER_PORT, "protocol": "TCP"}
        ],
        "securityContext": {
            "runAsUser": 0,  # capabilities reach the process only as root (no ambient capabilities in Kubernetes)
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "privileged": False,
            "capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]},
        },
        "volumeMounts": [{"name": "sys", "mountPath": "/sys", "readOnly": True}],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "livenessProbe": {
            "httpGet": {"path": "/metrics", "port": EXPORTER_PORT},
            "initialDelaySeconds": 30,
            "periodSeconds": 60,
            "timeoutSeconds": 10,
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "fabricscope-exporter", "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "hostNetwork": True,
                    "dnsPolicy": "ClusterFirstWithHostNet",
                    "automountServiceAccountToken": False,
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "tolerations": [{"operator": "Exists"}],  # also on nodes fabricscope itself tainted
                    "containers": [container],
                    "volumes": [{"name": "sys", "hostPath": {"path": "/sys", "type": "Directory"}}],
                },
            },
        },
    }


def npd_plugin_config(fabricscope_path: str, interval_s: int = 300, timeout_s: int = 60) -> dict[str, Any]:
    """node-problem-detector custom-plugin-monitor configuration running `doctor --nhc`."""
    return {
        "plugin": "custom",
        "pluginConfig": {
            "invoke_interval": f"{interval_s}s",
            "timeout": f"{timeout_s}s",
            "max_output_length": 200,  # fabricscope's NHC reason is at most 200 characters
            "concurrency": 1,
            "enable_message_change_based_condition_update": False,
        },
        "source": "fabricscope",
        "metricsReporting": True,
        "conditions": [
            {
                "type": NPD_CONDITION,
                "reason": "FabricHealthy",
                "message": "fabricscope doctor found nothing at --fail-on",
            },
        ],
        "rules": [
            {
                "type": "permanent",
                "condition": NPD_CONDITION,
                "reason": "FabricDoctorFailed",
                "path": fabricscope_path,
                "args": ["doctor", "--nhc"],
                "timeout": f"{timeout_s}s",
            }
        ],
    }


def npd_configmap(namespace: str, config: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "fabricscope-npd-plugin",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "fabricscope"},
        },
        "data": {"fabricscope-plugin.json": json.dumps(config, indent=2) + "\n"},
    }


def manifests(
    namespace: str = "monitoring",
    npd_namespace: str = "kube-system",
    image: str | None = None,
    fabricscope_path: str = "/usr/local/bin/fabricscope",
) -> dict[str, tuple[str, Any]]:
    """File name -> (kind of file, content) for `monitoring k8s -o DIR`."""
    config = npd_plugin_config(fabricscope_path)
    return {
        "fabricscope-exporter-daemonset.yaml": (
            "yaml",
            exporter_daemonset(namespace, image or f"fabricscope:{__version__}"),
        ),
        "fabricscope-npd-plugin.json": ("json", config),
        "fabricscope-npd-configmap.yaml": ("yaml", npd_configmap(npd_namespace, config)),
    }
