"""Named model shapes (``--model``): the figures of each model's published configuration, so that a
question about "Llama 3.1 70B" does not rest on a shape derived from a parameter count.

Each shape is the model's own config (Hugging Face ``config.json`` or the paper), named per model.
A ``--model`` fills what the user did not give, as ``--system`` does for the hardware.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from fabricscope.errors import FabricscopeError
from fabricscope.registry import by_name


@dataclass(frozen=True)
class ModelShape:
    name: str
    params: float
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    gated_mlp: bool
    source: str
    experts: int = 0
    active_experts: int = 0
    active_params: float | None = None
    moe_ffn: int | None = None  # an expert's MLP width, where it differs from the dense layers'
    kv_bytes_per_token: int | None = None  # where attention caches less than K and V per head (MLA)

    def _dimensions(self) -> dict[str, Any]:
        """What training and serving both read: the size, depth and width, and the attention heads."""
        return {
            "params": self.params,
            "layers": self.layers,
            "hidden": self.hidden,
            "heads": self.heads,
            "kv_heads": self.kv_heads,
        }

    def train_params(self) -> dict[str, Any]:
        p = {
            **self._dimensions(),
            "ffn": self.moe_ffn or self.ffn,
            "vocab": self.vocab,
            "gated_mlp": self.gated_mlp,
        }
        if self.experts:
            p.update(experts=self.experts, active_experts=self.active_experts)
        return p

    def infer_params(self) -> dict[str, Any]:
        p = self._dimensions()
        if self.kv_bytes_per_token:
            p["kv_bytes_per_token"] = str(self.kv_bytes_per_token)
        if self.experts:
            p.update(
                experts=self.experts, active_experts=self.active_experts, active_params=self.active_params
            )
        return p


HF = "https://huggingface.co/"
MODELS: dict[str, ModelShape] = by_name(
    ModelShape(
        "llama3-8b",
        8.03e9,
        32,
        4096,
        32,
        8,
        14336,
        128256,
        True,
        HF + "meta-llama/Llama-3.1-8B config.json",
    ),
    ModelShape(
        "llama3-70b",
        70.6e9,
        80,
        8192,
        64,
        8,
        28672,
        128256,
        True,
        HF + "meta-llama/Llama-3.1-70B config.json",
    ),
    ModelShape(
        "llama3-405b",
        405.9e9,
        126,
        16384,
        128,
        8,
        53248,
        128256,
        True,
        HF + "meta-llama/Llama-3.1-405B config.json",
    ),
    ModelShape(
        "nemotron4-15b",
        15.6e9,
        32,
        6144,
        48,
        8,
        24576,
        256000,
        False,
        "Nemotron-4 15B technical report, arXiv 2402.16819 (squared ReLU MLP, GQA 8)",
    ),
    ModelShape(
        "nemotron4-340b",
        341e9,
        96,
        18432,
        96,
        8,
        73728,
        256000,
        False,
        HF + "nvidia/Nemotron-4-340B-Base (arXiv 2406.11704)",
    ),
    ModelShape("mpt-70b", 64.9e9, 80, 8192, 64, 64, 32768, 50432, False, HF + "mosaicml/mpt-70b config.json"),
    ModelShape(
        "gpt3-175b", 175e9, 96, 12288, 96, 96, 49152, 51200, False, "Brown et al. 2020, arXiv 2005.14165"
    ),
    ModelShape(
        "mixtral-8x7b",
        46.7e9,
        32,
        4096,
        32,
        8,
        14336,
        32000,
        True,
        HF + "mistralai/Mixtral-8x7B-v0.1 config.json",
        experts=8,
        active_experts=2,
        active_params=12.9e9,
    ),
    ModelShape(
        "deepseek-v3",
        671e9,
        61,
        7168,
        128,
        128,
        18432,
        129280,
        True,
        HF + "deepseek-ai/DeepSeek-V3 config.json (MLA counted as full heads; 256 routed experts, top 8)",
        experts=256,
        active_experts=8,
        active_params=37e9,
        moe_ffn=2048,
        kv_bytes_per_token=61 * (512 + 64) * 2,
    ),  # MLA: kv_lora_rank 512 + rope 64 per layer, bf16
)


def named(name: str) -> ModelShape:
    key = str(name).lower()
    if key not in MODELS:
        raise FabricscopeError(f"unknown model {name!r} (known: {', '.join(MODELS)})")
    return MODELS[key]


def describe(name: str) -> dict[str, Any]:
    return asdict(named(name))
