"""The options every ``fabricscope sim`` command shares, built from the scenario models.

An option's name, type, default and help are the pydantic field's (sim/params.py: ``Scenario``,
``TrainPlan``, ``InferPlan``), so ``sim collective``, ``sim train``, ``sim infer`` and ``sim
compare`` spell, type and document a parameter the same way, and ``sim compare --vary`` accepts
the same names. ``@scenario_options(...)`` adds the named fields to a command as typer options and
hands the command the values the user gave as one dict, ``scenario``; the command never collects
its own parameters with ``locals()``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import typer
from pydantic import BaseModel

from fabricscope.sim.params import NETWORK_FIELDS, NODE_FIELDS, InferPlan, Scenario, TrainPlan

F = TypeVar("F", bound=Callable[..., Any])

# Groups of Scenario fields, in the order --help lists them.
FABRIC = ("system", "nvlink_domain", "topology", "topology_file", *NODE_FIELDS, *NETWORK_FIELDS)
TRANSPORT = (
    "transport",
    "loss",
    "mtu",
    "ecn",
    "per_core_gbps",
    "nsocks_perthread",
    "socket_nthreads",
    "qps_per_connection",
    "host_mem_GBps",
    "rto_ms",
    "alpha_us",
    "efficiency",
    "framing",
    "routing",
    "seed",
)
COLLECTIVE = ("op", "algo", "proto", "explain", "pxn", "sharp", "size", "channels", "node_order")
TRAIN = tuple(TrainPlan.model_fields)
INFER = tuple(InferPlan.model_fields)
MODELS: tuple[type[BaseModel], ...] = (Scenario, TrainPlan, InferPlan)

# --help panels (at most 16 options each, issue 26 item 5): the groups above, the fabric split into
# the machines and the network between them, a plan split into the model's shape and the rest.
SYSTEM = ("system", "nvlink_domain", *NODE_FIELDS, "nvlink_efficiency", "intra_link", "nvswitch")
MODEL_SHAPE = (
    "model",
    "params",
    "active_params",
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "ffn",
    "gated_mlp",
    "vocab",
    "seq_len",
    "experts",
    "active_experts",
    "kv_bytes_per_token",
)


def panel_of(name: str, flag: str = "") -> str:
    """The --help panel of a scenario field. On/off pairs (--x/--no-x) get their own panel: their
    two names would push every description in a panel right."""
    if "/" in flag:
        return "Switches"
    if name in SYSTEM:
        return "System"
    if name in FABRIC:
        return "Fabric"
    if name in TRANSPORT:
        return "Transport"
    if name in COLLECTIVE:
        return "Collective"
    if name in MODEL_SHAPE:
        return "Model"
    return "Training plan" if name in TRAIN and name not in INFER else "Plan"


def _field(name: str, models: Iterable[type[BaseModel]]) -> Any:
    for m in models:
        if name in m.model_fields:
            return m.model_fields[name]
    raise KeyError(name)


def _cli_type(annotation: Any) -> Any:
    """The field's type as a CLI option: optional (unset means the model's default), a list for
    repeatable options, numbers typed (a float field that takes 70e9 stays a float)."""
    args = (
        [a for a in get_args(annotation) if a is not type(None)]
        if get_origin(annotation) in (Union, type(int | None))
        else [annotation]
    )
    base = args[0]
    if get_origin(base) in (tuple, dict) or base in (tuple, dict):
        return list[str] | None
    return base | None


def option(name: str, default: Any = None, models: Iterable[type[BaseModel]] = MODELS) -> inspect.Parameter:
    """One scenario field as a keyword parameter carrying its typer option."""
    f = _field(name, models)
    flag = (f.json_schema_extra or {}).get("flag") or "--" + name.replace("_", "-")
    help_text = f.description or ""
    if f.default not in (None, (), {}) and "default" not in help_text:
        help_text += f" [model default: {f.default}]"
    extra: dict[str, Any] = {}
    for meta in f.metadata:  # ge/le bounds become the option's own range checks
        for attr, key in (("ge", "min"), ("le", "max")):
            if getattr(meta, attr, None) is not None:
                extra[key] = getattr(meta, attr)
    ann = Annotated[  # type: ignore[valid-type]
        _cli_type(f.annotation),
        typer.Option(flag, help=help_text, rich_help_panel=panel_of(name, flag), **extra),
    ]
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=ann)


def scenario_options(
    *groups: Iterable[str], defaults: dict[str, Any] | None = None, models: Iterable[type[BaseModel]] = MODELS
) -> Callable[[F], F]:
    """Add the fields of ``groups`` to the command as options; the command gets ``scenario``: the
    values given (or defaulted here, per command, in ``defaults``), never None."""
    names = [n for g in groups for n in g]
    defaults = defaults or {}
    models = tuple(models)

    def wrap(fn: F) -> F:
        sig = inspect.signature(fn, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name != "scenario"]
        taken = {p.name for p in own}
        added = [option(n, defaults.get(n), models) for n in dict.fromkeys(names) if n not in taken]

        @functools.wraps(fn)
        def command(**kw: Any) -> Any:
            given = {p.name: kw.pop(p.name) for p in added}
            scenario = {
                k: (tuple(v) if isinstance(v, list) else v) for k, v in given.items() if v is not None
            }
            return fn(scenario=scenario, **kw)

        command.__signature__ = sig.replace(parameters=[*own, *added])  # type: ignore[attr-defined]
        return command  # type: ignore[return-value]

    return wrap
