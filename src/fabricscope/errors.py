"""Errors that end a command with exit status 2 and one line on stderr."""


class FabricscopeError(Exception):
    """Unusable input or a run that could not complete; the message is shown to the user as is."""

    exit_code = 2
