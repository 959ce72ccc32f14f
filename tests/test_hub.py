"""Hub ids read from a Hugging Face cache laid out as huggingface_hub lays it out, in a temporary folder."""

import shutil
import sys
from pathlib import Path

import pytest

from shapewise.cli import main
from shapewise.errors import ShapewiseError
from shapewise.hub import cache_dir, cached_config, config_path, resolve_model
from shapewise.presets import PRESETS

CORPUS = Path(__file__).parent / "data" / "hf"


def _cache(root: Path, repo_id: str, file: str, *, revision: str = "abc123", ref: bool = True) -> Path:
    repo = root / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    shutil.copy(CORPUS / file, snapshot / "config.json")
    if ref:
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(revision)
    return snapshot / "config.json"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / "hub"


def test_cache_dir_honours_hf_home_and_hf_hub_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))
    assert cache_dir() == tmp_path / "elsewhere"


def test_a_cached_hub_id_reads_the_revision_refs_main_names(hub):
    _cache(hub, "meta-llama/Llama-3.1-8B", "llama-2-7b.json", revision="old", ref=False)
    current = hub / "models--meta-llama--Llama-3.1-8B" / "snapshots" / "new"
    current.mkdir()
    shutil.copy(CORPUS / "llama-3.1-8b.json", current / "config.json")
    (hub / "models--meta-llama--Llama-3.1-8B" / "refs").mkdir()
    (hub / "models--meta-llama--Llama-3.1-8B" / "refs" / "main").write_text("new\n")
    assert cached_config("meta-llama/Llama-3.1-8B") == current / "config.json"
    shape = resolve_model("meta-llama/Llama-3.1-8B")
    assert (shape.vocab, shape.kv_heads) == (128256, 8)


def test_a_single_snapshot_without_refs_is_read(hub):
    file = _cache(hub, "Qwen/Qwen3-8B", "qwen3-8b.json", ref=False)
    assert cached_config("Qwen/Qwen3-8B") == file


def test_every_model_command_takes_a_hub_id(hub, capsys):
    _cache(hub, "meta-llama/Llama-3.1-8B", "llama-3.1-8b.json")
    assert main(["check", "meta-llama/Llama-3.1-8B", "--json"]) == 0
    assert '"params": 8030261248' in capsys.readouterr().out


def test_not_cached_and_offline_is_one_line_exit_2(hub, capsys):
    assert main(["check", "someone/not-cached-model"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not in the Hugging Face cache" in err


def test_a_preset_answers_for_its_hub_id_when_not_cached(hub):
    assert resolve_model("meta-llama/Llama-2-7b-hf") is PRESETS["llama2-7b"]


def test_without_huggingface_hub_a_miss_says_how_to_fix_it(hub, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails as if not installed
    with pytest.raises(ShapewiseError, match="pip install huggingface_hub"):
        resolve_model("someone/not-cached-model")


def test_a_local_folder_is_read_as_one_though_it_looks_like_a_hub_id(hub, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-org" / "tiny").mkdir(parents=True)
    assert config_path("my-org/tiny") == Path("my-org/tiny/config.json")
    with pytest.raises(ShapewiseError, match="folder has no config.json"):  # the folder, not its missing file
        resolve_model("my-org/tiny")
    shutil.copy(CORPUS / "llama-2-7b.json", tmp_path / "my-org" / "tiny" / "config.json")
    assert resolve_model("my-org/tiny").vocab == resolve_model("my-org/tiny/config.json").vocab == 32000
    assert config_path("gpt2") is None
