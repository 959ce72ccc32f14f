"""Models named by Hugging Face hub id (meta-llama/Llama-3.1-8B): their config.json from the local
Hugging Face cache, or, where huggingface_hub is installed and the network allows, that one file
downloaded; and the one place a model argument (preset, path or hub id) becomes a ModelShape."""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import ShapewiseError, warn
from .hf import load_config
from .presets import PRESETS, get_model, hub_id, preset_key, preset_like
from .shapes import ModelShape

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def cache_dir() -> Path:
    """Where huggingface_hub keeps downloads: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def cached_config(repo_id: str) -> Path | None:
    """The cached config.json of the revision refs/main names (models--org--name/snapshots/<rev>/), or
    None. Without refs/main, a single cached snapshot is taken; several are ambiguous, and refused."""
    repo = cache_dir() / ("models--" + repo_id.replace("/", "--"))
    ref = repo / "refs" / "main"
    try:
        if ref.is_file():
            revision = ref.read_text(encoding="utf-8").strip()
            file = repo / "snapshots" / revision / "config.json"
            return file if file.is_file() else None
        found = sorted((repo / "snapshots").glob("*/config.json")) if (repo / "snapshots").is_dir() else []
    except (OSError, UnicodeDecodeError) as err:  # a cache folder without permission, a refs/main not text
        raise ShapewiseError(f"{repo}: cannot read this Hugging Face cache entry "
                             f"({getattr(err, 'strerror', None) or 'not text'})") from None
    if len(found) > 1:  # several revisions and no refs/main to name the current one: said, not guessed
        raise ShapewiseError(f"{repo_id}: the Hugging Face cache ({cache_dir()}) holds {len(found)} snapshots of it "
                             f"({', '.join(f.parent.name for f in found)}) and no refs/main to tell which is current; "
                             f"give the path of the one meant ({repo / 'snapshots' / 'REVISION' / 'config.json'})")
    return found[0] if found else None


def download_config(repo_id: str) -> Path:
    """config.json alone, fetched through huggingface_hub (which caches it); a one-line error when the
    library is missing, the hub is offline, or the repository has no such file."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ShapewiseError(f"{repo_id} is not in the Hugging Face cache ({cache_dir()}) and huggingface_hub is "
                             f"not installed to fetch it; pip install huggingface_hub, or give the path of a "
                             f"config.json") from None
    try:
        return Path(hf_hub_download(repo_id, "config.json"))
    except Exception as err:  # offline, gated, missing: huggingface_hub raises many kinds; say which, in one line
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ShapewiseError(f"{repo_id}: cannot fetch config.json from the Hugging Face hub and it is not "
                             f"cached ({type(err).__name__}: {reason[:160]})") from None


def _local_config(name: str) -> Path | None:
    """The config.json, or the folder holding one, that a model argument names as a path: one that exists,
    whatever its name (a local org/name folder is read, not the hub id it looks like), or one ending in
    .json; None otherwise."""
    path = Path(name)
    try:
        return path if name.endswith(".json") or path.exists() else None
    except OSError:  # there, but not to be looked at (inside a folder without permission): load_config says so
        return path


def _shadowed(name: str) -> str:
    """What a model argument read as a local path would have named otherwise: a cached hub model or a
    preset ("" for nothing)."""
    if HUB_ID.match(name):
        try:
            cached = cached_config(name) is not None
        except ShapewiseError:  # there, if not to be read: the local path is read all the same
            cached = True
        if cached:
            return f"the hub model {name} in the local Hugging Face cache"
    key = preset_key(name)
    return f"the preset {key}" if key else ""


def config_path(name: str) -> Path | None:
    """The config.json a model argument reads: the path itself (or its folder's file), or a hub id's file in
    the local cache; None for a preset. suggest --emit-config writes its suggestion into this file's keys."""
    path = _local_config(name)
    if path is not None:
        return path / "config.json" if os.path.isdir(path) else path
    return cached_config(name) if HUB_ID.match(name) else None


def resolve_model(name: str | os.PathLike | ModelShape, *, strict: bool = False) -> ModelShape:
    """A model argument as a shape: a path that exists (a config.json, whatever its name, or its folder) or
    ends in .json, a hub id (read from the cache, else the preset of the same checkpoint, said, else
    downloaded), or a preset name. A hub id names the model read from it, not the cache's snapshot folder.
    A pathlib.Path is read as its text; a ModelShape is itself."""
    if isinstance(name, ModelShape):
        return name
    if isinstance(name, os.PathLike):  # Path("llama/config.json"): what load_config takes, not a name refused
        name = os.fspath(name)
    if not isinstance(name, str) or not name.strip():
        raise ShapewiseError(f"give a model name, got {name!r}; run `shapewise models` to list the presets")
    path = _local_config(name)
    if path is not None:  # the folder itself, so that one without a config.json is refused as such
        shadowed = _shadowed(name)
        read = f"the local {'folder' if os.path.isdir(path) else 'file'} {os.path.abspath(path)}, not {shadowed}; " \
            f"run from another folder to price that"
        try:
            shape = load_config(path, strict=strict)
        except ShapewiseError as err:  # a stray file called gpt2: say why it was read at all
            if not shadowed:
                raise
            raise type(err)(f"{err} (read as {read})") from None
        if shadowed:
            warn(f"{name}: read {read}")
        return shape
    if HUB_ID.match(name):
        cached = cached_config(name)
        if cached is not None:
            return load_config(cached, strict=strict).replace(name=name)
        key = preset_key(name)
        if key is not None:
            checkpoint = hub_id(key)  # there is one: a hub id names a preset only through its checkpoint
            warn(f"{name} is not in the local hub cache: priced as the preset {key}"
                 + ("" if name.lower() == checkpoint.lower() else f" ({checkpoint}, the same shape)"))
            return PRESETS[key]
        like = preset_like(name)
        checkpoint = hub_id(like) if like else None
        hint = f" (the preset {like} has {checkpoint}'s shape, which {name} need not share)" if checkpoint else ""
        if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
            raise ShapewiseError(f"{name} is not a local path and not in the Hugging Face cache ({cache_dir()}), and "
                                 f"HF_HUB_OFFLINE is set; download it once with the network on, or give the path "
                                 f"of a config.json{hint}")
        return load_config(download_config(name), strict=strict).replace(name=name)
    if "/" in name or os.sep in name:
        raise ShapewiseError(f"{name}: no such file or folder; give a config.json, the folder holding one, a hub "
                             f"id (org/name) or a preset name (`shapewise models` lists them)")
    return get_model(name)
