"""Errors that end a command with exit status 2 and one line on stderr."""


class FabricscopeError(Exception):
    """Unusable input or a run that could not complete; the message is shown to the user as is."""

    exit_code = 2


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception as one short line for an error message (torch and socket errors span lines)."""
    return (" ".join(str(exc).split()) or type(exc).__name__)[:limit]
