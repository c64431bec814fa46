"""The one place fabricscope unpickles: a restricted reader for Flight Recorder dumps.

Dumps sit on shared file systems that many users can write, and a pickle can name any callable
to run while it loads. This reader admits plain data only (dict, list, tuple, str, int, float,
bool, None, bytes), like ``torch.load(weights_only=True)``: a real Flight Recorder dump needs no
global at all (its pickles hold only those types' opcodes), so any pickle that asks for a global
other than these builtin types, or for a persistent id, is refused by name as hostile.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

# The builtin types a pickle may name (protocol 0/1 pickles reach some of them through GLOBAL);
# None, True and False have opcodes of their own.
PLAIN_TYPES = frozenset({"dict", "list", "tuple", "str", "int", "float", "bool", "bytes"})


class HostilePickle(pickle.UnpicklingError):
    """A pickle that asked for something other than plain data: never loaded, named in the report."""


class PlainDataUnpickler(pickle.Unpickler):
    """:class:`pickle.Unpickler` (the C implementation) that resolves no global but the plain types."""

    def find_class(self, module: str, name: str) -> Any:
        if module in ("builtins", "__builtin__") and name in PLAIN_TYPES:
            return {
                "dict": dict,
                "list": list,
                "tuple": tuple,
                "str": str,
                "int": int,
                "float": float,
                "bool": bool,
                "bytes": bytes,
            }[name]
        raise HostilePickle(f"refused: the pickle asks for {module}.{name} (only plain data is read)")

    def persistent_load(self, pid: Any) -> Any:
        raise HostilePickle("refused: the pickle asks for a persistent object (only plain data is read)")


def loads_plain(data: bytes) -> Any:
    """Plain data from ``data``; :class:`HostilePickle` for a pickle naming anything else, and
    whatever the C unpickler raises for a broken one (UnpicklingError, EOFError, ValueError,
    AttributeError, KeyError...: callers catch them all)."""
    return PlainDataUnpickler(io.BytesIO(data)).load()
