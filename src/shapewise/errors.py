"""The one error a user's bad input raises (the CLI prints its message and exits 2), and the one way
a warning reaches the user: a ShapewiseWarning, which a library user filters, captures or turns into
an error as any Python warning, and the CLI prints as one line."""

import contextvars
import os
import sys
import warnings
from contextlib import contextmanager


class ShapewiseError(ValueError):
    """Bad input from the user: the message says what is wrong and how to fix it."""


class ShapewiseWarning(UserWarning):
    """What shapewise did that the user did not ask for, and why."""


def listed(words, last: str = "or") -> str:
    """Words as a message lists them: "a", "a or b", "a, b or c" (last="and": "a, b and c")."""
    words = [str(w) for w in words]
    return f"{', '.join(words[:-1])} {last} {words[-1]}" if len(words) > 1 else "".join(words)


def check_name(value, names, what: str, *, owner: str = "") -> None:
    """Refuse a value that is not one of `names` ("unknown dtype 'bf17'; use one of …", after "owner: "),
    a list or other unhashable value among them (it is no name: `in` a dict would raise TypeError)."""
    if not isinstance(value, str) or value not in names:
        raise ShapewiseError(f"{owner + ': ' if owner else ''}unknown {what} {value!r}; use one of {', '.join(names)}")


# A message names an argument as its caller wrote it: a Python caller's keyword (params_tol), or, while the
# command line runs a command, that keyword's flag (--params-tol), from the table it gives named_by_flags.
_FLAGS: contextvars.ContextVar[dict] = contextvars.ContextVar("shapewise_flags", default={})


def argument(keyword: str, flag: str | None = None) -> str:
    """The argument `keyword` as its caller wrote it: the keyword itself, or its flag under the command line (`flag`
    where the command's differs from the table's: verify's mode is its --measure, Workload's mode --mode)."""
    flags = _FLAGS.get()
    return (flag or flags.get(keyword, keyword)) if flags else keyword


def switched_on(keyword: str) -> str:
    """How its caller turns on the boolean argument `keyword`: "add --borrow-profile", or "pass borrow_profile=True"."""
    name = argument(keyword)
    return f"add {name}" if name.startswith("-") else f"pass {name}=True"


@contextmanager
def named_by_flags(flags: dict):
    """Within it, messages name the arguments of `flags` (keyword -> flag) by their flags."""
    token = _FLAGS.set(flags)
    try:
        yield
    finally:
        _FLAGS.reset(token)


_PACKAGE = os.path.dirname(__file__) + os.sep  # as every module of the package names its file


def warn(message: str) -> None:
    """Issue a ShapewiseWarning with `message`, attributed to the first caller outside shapewise (the
    user's call that led to it), so Python's filters and its once-per-location default apply there."""
    warnings.warn(message, ShapewiseWarning, stacklevel=_outside_level())


def _outside_level() -> int:
    """warnings.warn's stacklevel of the first frame outside the package, counted from warn's caller
    (2); 2 when every frame is inside it."""
    frame, level = sys._getframe(2), 2
    while frame is not None and _inside(frame):
        frame, level = frame.f_back, level + 1
    return level if frame is not None else 2


def _inside(frame) -> bool:
    """A frame of the package's code: its files', or a dataclass's __init__, made by exec in its module."""
    module = frame.f_globals.get("__name__") or ""
    return (frame.f_code.co_filename.startswith(_PACKAGE) or module == __package__
            or module.startswith(__package__ + "."))
