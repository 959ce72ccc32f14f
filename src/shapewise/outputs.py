"""Where a command writes: the file's format, from its extension or --format (a mismatch is an
error), its folder (an error when missing, unless the user asks for it to be made), and every reason
it cannot be written (a folder, a path under a file, a folder that takes no files), each in one line
before any work is done, so that a long command never fails at its last step."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import ShapewiseError, listed


def output_file(path, *, formats: dict[str, str], fmt: str | None = None, mkdir: bool = False,
                what: str = "output") -> tuple[Path, str]:
    """The path to write and its format. `formats` maps extensions (".html") to format names
    ("html"); fmt, when given, is the format asked for, and the extension must agree with it."""
    if path is None or not str(path).strip():
        raise ShapewiseError(f"give a file to write the {what} to")
    target = Path(path).expanduser()
    names = listed(formats)  # in the caller's order, the usual first: ".png or .svg"
    if target.is_dir():  # the example keeps the format the folder's name asked for (report.md/ -> out.md)
        ext = target.suffix.lower() if target.suffix.lower() in formats else next(iter(formats))
        raise ShapewiseError(f"{target} is a folder: give a file in it, e.g. {target / ('out' + ext)}")
    # the longest extension the name ends with: ".csv.gz" before ".gz"
    from_name = next((formats[ext] for ext in sorted(formats, key=len, reverse=True)
                      if target.name.lower().endswith(ext)), None)
    if from_name is None:
        hint = f" (for --format {fmt}, name it {_suffix(formats, fmt)})" if fmt else ""
        raise ShapewiseError(f"cannot tell the {what}'s format from {target.name!r}: name the file {names}{hint}")
    if fmt is not None and fmt != from_name:
        raise ShapewiseError(f"{target.name} names a {from_name} file but --format is {fmt}: "
                             f"name it {_suffix(formats, fmt)} or drop --format")
    writable_folder(target.parent, mkdir=mkdir, what=what)
    if target.exists() and not os.access(target, os.W_OK):
        raise ShapewiseError(f"cannot write the {what} to {target}: the file is read-only")
    return target, from_name


# The folders --mkdir made during a command, deepest first: taken back (take_back_folders) where the command is
# refused after making them, so that a refusal leaves nothing behind.
MADE: list[Path] = []


def take_back_folders() -> None:
    """Remove the folders --mkdir made for a command that was then refused, where they are still empty."""
    for folder in MADE:
        try:
            folder.rmdir()  # only an empty folder: what the command wrote before its refusal stays
        except OSError:
            break  # not empty (or gone): its parents are not empty either
    MADE.clear()


def writable_folder(folder: Path, *, mkdir: bool = False, what: str = "output") -> Path:
    """`folder`, made when asked; an error when it is missing, lies under a file, or takes no files."""
    for parent in (folder, *folder.parents):
        if parent.exists():
            if not parent.is_dir():
                raise ShapewiseError(f"cannot write the {what} under {parent}: it is a file, not a folder")
            break
    if not folder.exists():
        if not mkdir:
            raise ShapewiseError(f"the folder {folder} does not exist: create it, or add --mkdir to have it made")
        missing = [p for p in (folder, *folder.parents) if not p.exists()]
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ShapewiseError(f"cannot make the folder {folder}: {err.strerror or err}") from None
        MADE.extend(missing)  # deepest first, as take_back_folders removes them
    try:  # the one sure test, root included: can a file be made here?
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise ShapewiseError(f"cannot write the {what} into {folder}: {err.strerror or err}") from None
    return folder


def _suffix(formats: dict[str, str], fmt: str | None) -> str:
    return next((suffix for suffix, name in formats.items() if name == fmt), f".{fmt}")
