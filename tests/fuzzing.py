"""Shared by the robustness tests: one command run in this process with its output captured, the
rules every outcome must follow, and a bound on the memory a command may take."""

from __future__ import annotations

import contextlib
import io
import resource
from pathlib import Path

from hypothesis import HealthCheck, settings

from shapewise.cli import main

# Seeded: CI sees the same cases on every run. database=None: no example store in the work tree.
_SEEDED = settings(derandomize=True, database=None, deadline=None, print_blob=False,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                          HealthCheck.filter_too_much])


def fuzz(examples: int) -> settings:
    """Seeded settings for `examples` generated cases (the suites add up to well over 300)."""
    return settings(_SEEDED, max_examples=examples)
# What one command may allocate beyond what the test process already holds: the largest honest
# input (a 2^24-token sequence, a 65,536-value sweep) prices in a few hundred MB at most.
MEMORY_BOUND_BYTES = 2 * 2**30


def _data_bytes() -> int:
    """The process's data segment and private anonymous memory, as RLIMIT_DATA counts them."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmData:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmData in /proc/self/status")


@contextlib.contextmanager
def memory_bound(extra_bytes: int = MEMORY_BOUND_BYTES):
    """Refuse allocations past `extra_bytes` more than now (a MemoryError, which the checks below
    count as a crash), and restore the limit after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = _data_bytes() + extra_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


COMMANDS_RUN = [0]  # commands invoke() ran in this test run: the summary line reports it


def invoke(*argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of one command, under the memory bound. Any exception but
    argparse's SystemExit escapes: a traceback is a failure."""
    COMMANDS_RUN[0] += 1
    out, err = io.StringIO(), io.StringIO()
    with memory_bound(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exit_:
            code = exit_.code
    return code, out.getvalue(), err.getvalue()


def assert_explained(code: int, out: str, err: str, *, argv=(), strict: bool = False) -> None:
    """Every outcome: exit 0 or 2 (1 only under --strict), no traceback, and on an error exactly one
    line that says so (warnings, one line each, may come before it)."""
    allowed = (0, 1, 2) if strict else (0, 2)
    assert code in allowed, f"exit {code} for {list(argv)}: {err}"
    assert "Traceback" not in err and "Traceback" not in out, f"traceback for {list(argv)}: {err}"
    lines = err.splitlines()
    if code == 2:
        errors = [line for line in lines if line.startswith("shapewise: error:")]
        assert len(errors) == 1 and lines[-1] == errors[0], f"not one error line for {list(argv)}: {err!r}"
        assert len(errors[0]) > len("shapewise: error: ") + 10, f"an error that says nothing: {err!r}"
    others = [line for line in lines if not line.startswith("shapewise: error:")]
    assert all(line.startswith("shapewise: warning:") for line in others), \
        f"stderr lines that are neither a warning nor the error for {list(argv)}: {err!r}"


def run_explained(*argv: str, strict: bool = False) -> tuple[int, str, str]:
    code, out, err = invoke(*argv)
    assert_explained(code, out, err, argv=argv, strict=strict)
    return code, out, err
