"""fabricscope: does the network deliver what the GPUs need, why not, and what to change."""

__version__ = "0.1.0"
