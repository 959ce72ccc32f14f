"""The thirtieth round of real configs (tests/data/hf-thirtieth/, sources in its SOURCES.md): tt-metal's copies of
Qwen3-Embedding-4B and 0.6B, and the diffusion transformer's config.json of MiniMax-H3, a diffusers pipeline.

MiniMax-H3's transformer/config.json (MiniMaxH3Transformer3DModel, _diffusers_version 0.36.0.dev0) was refused with
"no vocabulary size found; tried padded_vocab_size, vocab_size", a line that names a key, not what the file is; a
diffusers file that wrote a vocabulary beside a hidden size and a layer count would have been priced as a language
model of a type shapewise guessed. A file with _diffusers_version is now refused as a diffusers model's config, in
one line, naming its class."""

import json
from pathlib import Path

import pytest

from helpers import read_config_said, run
from shapewise.errors import ShapewiseError
from shapewise.hf import load_config

DATA = Path(__file__).parent / "data"
ROUND = DATA / "hf-thirtieth"
FILES = {p.stem: p for p in DATA.glob("hf*/*.json")}


def test_qwen3_embedding_4b_counts_to_its_card_and_is_said_to_be_an_embedding_model():
    shape, said = read_config_said(ROUND, "qwen3-embedding-4b")
    assert (shape.num_layers, shape.hidden, shape.num_heads, shape.kv_heads, shape.head_dim, shape.ffn_width) == (
        36, 2560, 32, 8, 128, 9728)
    assert shape.qk_norm and shape.tied_embeddings and not shape.bias and shape.vocab == 151_665
    layer = 2560 * 4096 + 2 * 2560 * 1024 + 4096 * 2560 + 3 * 2560 * 9728 + 2 * 2560 + 2 * 128
    assert shape.params == 36 * layer + 151_665 * 2560 + 2560 == 4_021_774_336  # the card's "4B"
    assert "says an embedding model" in said and "151,665-row output head" in said
    # Qwen3-4B's layers, 271 fewer rows of vocabulary
    qwen3_4b = load_config(FILES["qwen3-4b"])
    assert shape.params == qwen3_4b.params - (151_936 - 151_665) * 2560


def test_qwen3_embedding_0_6b_reads_its_sixteen_heads_over_eight_kv_heads():
    shape, said = read_config_said(ROUND, "qwen3-embedding-0.6b")
    assert (shape.num_layers, shape.hidden, shape.num_heads, shape.kv_heads, shape.head_dim, shape.ffn_width) == (
        28, 1024, 16, 8, 128, 3072)
    assert shape.qk_norm and shape.tied_embeddings and shape.vocab == 151_669 and shape.context == 32_768
    layer = 1024 * 2048 + 2 * 1024 * 1024 + 2048 * 1024 + 3 * 1024 * 3072 + 2 * 1024 + 2 * 128
    assert shape.params == 28 * layer + 151_669 * 1024 + 1024 == 595_776_512  # the card's "0.6B"
    assert "says an embedding model" in said


def test_a_diffusers_config_is_refused_as_one(capsys):
    with pytest.raises(ShapewiseError, match=r"a diffusers model's config \(MiniMaxH3Transformer3DModel\), not a "
                                             r"transformers one \(_diffusers_version 0\.36\.0\.dev0\)") as err:
        load_config(ROUND / "minimax-h3-transformer.json")
    assert "\n" not in str(err.value) and "vocabulary" not in str(err.value)
    code, out, err = run(capsys, "check", "--config", str(ROUND / "minimax-h3-transformer.json"))
    assert code == 2 and not out and err.count("\n") == 1 and "diffusers" in err


def test_a_diffusers_config_with_a_language_models_keys_is_refused_not_priced(tmp_path):
    # a DiT's file that wrote a vocabulary was read as a transformer of guessed type; refused, whatever its keys
    cfg = {"_class_name": "SomeTransformer2DModel", "_diffusers_version": "0.30.0", "hidden_size": 2048,
           "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 8192, "vocab_size": 32000}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(ShapewiseError, match=r"a diffusers model's config \(SomeTransformer2DModel\)"):
        load_config(path)
    path.write_text(json.dumps({k: v for k, v in cfg.items() if not k.startswith("_")} | {"model_type": "llama"}))
    assert load_config(path).num_layers == 24  # the same keys, a transformers file: read
