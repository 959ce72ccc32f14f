"""The command line: each command parses its flags, calls one library function and renders the result.

One module per group of commands, each command's flags beside its handler; common.py holds what
they share (the model and measurement flags, the one choice of cost model, the console)."""

from __future__ import annotations

import os
import sys
import warnings

from .. import __version__
from ..errors import ShapewiseError, ShapewiseWarning, named_by_flags, warn
from ..outputs import MADE, take_back_folders
from . import bench, calibrate, check, plan, report, suggest
from .common import CAVEATS, FLAGS, SAID, Parser, leave_process_group


def build_parser() -> Parser:
    parser = Parser(prog="shapewise", description="Is this transformer's shape fast on this GPU?")
    parser.add_argument("--version", action="version", version=f"shapewise {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for add in (*check.COMMANDS, bench.add_bench, *calibrate.COMMANDS, *suggest.COMMANDS, *plan.COMMANDS, *report.COMMANDS):
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    with warnings.catch_warnings():  # the caller's filters and hook are back once the command is done
        warnings.simplefilter("always", ShapewiseWarning)  # each one said as often as raised, wherever from
        warnings.showwarning = _one_line(warnings.showwarning)
        try:
            code = _run(argv)
            sys.stdout.flush()  # a reader that left early (`| head`) is met here, not at exit as a traceback
            return code
        except BrokenPipeError:
            return _reader_gone()


def _reader_gone() -> int:
    """stdout's reader closed the pipe: end quietly with 1, as rich's console does for the tables, with stdout
    sent to /dev/null so that Python's own flush at exit does not fail on it again."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):  # a stdout with no file behind it (a test's capture)
        return 1
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    return 1


def _one_line(show):
    """warnings.showwarning for the command line: a ShapewiseWarning as one line on stderr; any other
    warning shown by `show`, as it would be without the command."""
    def say(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, ShapewiseWarning):
            SAID.append(str(message))
            print(f"shapewise: warning: {message}", file=sys.stderr)
        else:
            show(message, category, filename, lineno, file, line)
    return say


def _run(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    CAVEATS.clear()
    SAID.clear()
    MADE.clear()
    try:
        with named_by_flags(FLAGS):  # what the library says of its arguments names the flags given
            code = args.run(args)
        for line in CAVEATS:
            warn(line)
        return leave_process_group(code)
    except ShapewiseError as err:
        take_back_folders()  # a refusal leaves no folder --mkdir made for it
        if getattr(err, "exit_code", 2) == 1:  # a finding after the output (check --strict): its caveats first
            for line in CAVEATS:
                warn(line)
        print(f"shapewise: error: {' '.join(str(err).split())}", file=sys.stderr)  # one line, whatever it quotes
        return getattr(err, "exit_code", 2)  # a config read only by guessing, under --strict: 1
    except KeyboardInterrupt:
        print("shapewise: interrupted", file=sys.stderr)
        return 130
