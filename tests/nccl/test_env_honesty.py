"""`nccl env` and doctor never state as fact what they could not see (issue 22).

Each test changes one thing a fixture host shows (QoS data gone, a 3.10 kernel, an empty GID table,
a disabled second port) and checks what is said about it.
"""

from __future__ import annotations

from dataclasses import replace

from fabricscope.checks.rdma import port_state
from fabricscope.checks.registry import CheckContext
from fabricscope.checks.roce import roce_gid
from fabricscope.host import Root, read_inventory
from fabricscope.nccl.envgen import plan_env
from fabricscope.nccl.node import gpudirect_without_module
from tests.conftest import FIXTURE_HOSTS


def _inv(name: str):
    return read_inventory(Root.at(FIXTURE_HOSTS / name))


def _reason(plan, name: str) -> str:
    return next(v.reason for v in plan.variables if v.name == name)


def test_tc_is_not_guessed_when_pfc_and_trust_are_not_visible() -> None:
    healthy = _inv("roce-healthy")
    seen = plan_env(healthy)
    assert any(v.name == "NCCL_IB_TC" and v.value for v in seen.variables)  # visible: a class is exported
    blind = plan_env(replace(healthy, qos={}))
    reason = _reason(blind, "NCCL_IB_TC")
    assert "not visible" in reason and "ECN/DCQCN alone" not in reason
    assert not [v for v in blind.variables if v.name == "NCCL_IB_TC" and v.value]


def test_a_310_kernel_is_offered_no_dmabuf() -> None:
    inv = _inv("ib-ndr-healthy")
    old = replace(inv, versions=replace(inv.versions, kernel="3.10.0-1160.el7.x86_64", nvidia_open=None))
    dmabuf, advice = gpudirect_without_module(old)
    assert dmabuf is False and "3.10" in advice and "nvidia-peermem" in advice


def test_gpudirect_default_is_claimed_only_with_a_peer_memory_path() -> None:
    inv = _inv("ib-ndr-healthy")
    modules = tuple(m for m in inv.kernel.modules if m not in ("nvidia_peermem", "nv_peer_mem"))
    bare = replace(
        inv,
        kernel=replace(inv.kernel, modules=modules),
        versions=replace(inv.versions, kernel="3.10.0-1160.el7.x86_64", nvidia_open=False),
    )
    reason = _reason(plan_env(bare), "NCCL_NET_GDR_LEVEL")
    assert "already uses GPUDirect RDMA" not in reason
    with_module = _reason(plan_env(inv), "NCCL_NET_GDR_LEVEL")
    if "nvidia_peermem" in inv.kernel.modules or "nv_peer_mem" in inv.kernel.modules:
        assert "already uses GPUDirect RDMA" in with_module or "PHB" in with_module


def test_a_pod_without_any_gid_fails_with_the_attachment_fix() -> None:
    inv = _inv("roce-healthy")
    devices = tuple(replace(d, ports=tuple(replace(p, gids=()) for p in d.ports)) for d in inv.rdma_devices)
    pod = replace(inv, rdma_devices=devices)
    found = list(roce_gid(CheckContext(inventory=pod)))
    assert found and {f.severity.value for f in found} == {"fail"}
    assert "network attachment" in (found[0].fix or "") or "attach the pod" in (found[0].fix or "")
    assert "ip addr add" not in (found[0].fix or "")


def test_a_disabled_spare_port_is_information() -> None:
    inv = _inv("ib-ndr-healthy")
    dev = inv.rdma_devices[0]
    live = dev.ports[0]
    spare = replace(
        live, port=live.port + 1, state="DOWN", state_id=1, phys_state="Disabled", phys_state_id=3
    )
    node = replace(inv, rdma_devices=(replace(dev, ports=(live, spare)), *inv.rdma_devices[1:]))
    found = [f for f in port_state(CheckContext(inventory=node)) if f.subject == spare.name]
    assert [f.severity.value for f in found] == ["info"], found
