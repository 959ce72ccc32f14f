"""The one error a user's bad input raises; the CLI prints its message and exits 2."""


class ShapewiseError(ValueError):
    """Bad input from the user: the message says what is wrong and how to fix it."""
