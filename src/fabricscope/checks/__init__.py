"""Doctor checks: one module per area; each check registers itself in :mod:`registry`."""

from fabricscope.checks.registry import REGISTRY, CheckContext, CheckSpec, Rates, all_checks, check

__all__ = ["REGISTRY", "CheckContext", "CheckSpec", "Rates", "all_checks", "check"]
