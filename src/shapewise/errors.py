"""The one error a user's bad input raises (the CLI prints its message and exits 2), and the one way
a warning reaches the user."""

import sys


class ShapewiseError(ValueError):
    """Bad input from the user: the message says what is wrong and how to fix it."""


def warn(message: str) -> None:
    """One line on stderr: what shapewise did that the user did not ask for, and why."""
    print(f"shapewise: warning: {message}", file=sys.stderr)
