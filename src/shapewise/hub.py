"""Models named by Hugging Face hub id (meta-llama/Llama-3.1-8B): their config.json from the local
Hugging Face cache, or, where huggingface_hub is installed and the network allows, that one file
downloaded; and the one place a model argument (preset, path or hub id) becomes a ModelShape."""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import ShapewiseError
from .hf import load_config
from .presets import PRESETS, get_model, preset_key
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
    None. Without refs/main, a single cached snapshot is taken; several are ambiguous, so none is."""
    repo = cache_dir() / ("models--" + repo_id.replace("/", "--"))
    ref = repo / "refs" / "main"
    if ref.is_file():
        revision = ref.read_text(encoding="utf-8").strip()
        file = repo / "snapshots" / revision / "config.json"
        return file if file.is_file() else None
    found = sorted((repo / "snapshots").glob("*/config.json")) if (repo / "snapshots").is_dir() else []
    return found[0] if len(found) == 1 else None


def download_config(repo_id: str) -> Path:
    """config.json alone, fetched through huggingface_hub (which caches it); a one-line error when the
    library is missing, the hub is offline, or the repository has no such file."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ShapewiseError(f"{repo_id} is not in the Hugging Face cache ({cache_dir()}) and huggingface_hub is "
                             f"not installed to fetch it; pip install huggingface_hub, or give --config PATH") from None
    try:
        return Path(hf_hub_download(repo_id, "config.json"))
    except Exception as err:  # offline, gated, missing: huggingface_hub raises many kinds; say which, in one line
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ShapewiseError(f"{repo_id}: cannot fetch config.json from the Hugging Face hub and it is not "
                             f"cached ({type(err).__name__}: {reason[:160]})") from None


def _local_config(name: str) -> Path | None:
    """The config.json, or the folder holding one, that a model argument names as a path: it ends in .json
    or is a folder (a local org/name folder is read, not the hub id it looks like); None otherwise."""
    path = Path(name)
    return path if name.endswith(".json") or path.is_dir() else None


def config_path(name: str) -> Path | None:
    """The config.json a model argument reads: the path itself (or its folder's file), or a hub id's file in
    the local cache; None for a preset. suggest --emit-config writes its suggestion into this file's keys."""
    path = _local_config(name)
    if path is not None:
        return path / "config.json" if path.is_dir() else path
    return cached_config(name) if HUB_ID.match(name) else None


def resolve_model(name: str, *, strict: bool = False) -> ModelShape:
    """A model argument as a shape: a config.json path (or its folder), a hub id (read from the cache,
    else a preset of the same checkpoint, else downloaded), or a preset name. A hub id names the model
    read from it, not the cache's snapshot folder."""
    if not isinstance(name, str) or not name.strip():
        raise ShapewiseError(f"give a model name, got {name!r}; run `shapewise models` to list the presets")
    path = _local_config(name)
    if path is not None:  # the folder itself, so that one without a config.json is refused as such
        return load_config(path, strict=strict)
    if HUB_ID.match(name):
        cached = cached_config(name)
        if cached is not None:
            return load_config(cached, strict=strict).replace(name=name)
        if preset_key(name) is not None:
            return PRESETS[preset_key(name)]
        if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
            raise ShapewiseError(f"{name} is not in the Hugging Face cache ({cache_dir()}) and HF_HUB_OFFLINE is set; "
                                 f"download it once with the network on, or give --config PATH")
        return load_config(download_config(name), strict=strict).replace(name=name)
    return get_model(name)
