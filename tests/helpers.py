"""Shared by the command-line tests."""

import warnings

from shapewise.cli import main
from shapewise.hf import load_config


def run(capsys, *argv):
    """Exit code, stdout and stderr of one command; argparse's own exits count as exit codes."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def interrupt_after(monkeypatch, num_cases: int) -> None:
    """A sweep stopped by Ctrl-C after `num_cases` cases: the next one raises KeyboardInterrupt."""
    import shapewise.bench as bench

    measure, calls = bench._measure_one, []

    def measure_then_stop(*args, **kwargs):
        calls.append(1)
        if len(calls) > num_cases:
            raise KeyboardInterrupt
        return measure(*args, **kwargs)

    monkeypatch.setattr(bench, "_measure_one", measure_then_stop)


def read_config(path, stem: str | None = None):
    """The shape a config file (path, or a folder and the file's stem) reads as, and the warnings said beside it
    (each one's text after the file's name)."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        shape = load_config(path / f"{stem}.json" if stem else path)
    return shape, [str(w.message).split(": ", 1)[-1] for w in record]


def read_config_said(folder, stem: str):
    """read_config's shape and its warnings joined in one text, as a round's tests look for a phrase in them."""
    shape, said = read_config(folder, stem)
    return shape, " ".join(said)
