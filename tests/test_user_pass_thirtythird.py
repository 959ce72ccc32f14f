"""What a new user's thirty-third pass found, on the CPU:

- `suggest gpt2 --seq 1024 --keep hidden,heads,kv_heads,head_dim,ffn,vocab` said "(3 considered)" beside "no other
  shape is within reach": the three were gpt2 itself at other micro-batches, run settings of the second table, not
  shapes. The count was the (shape, micro-batch, t) pairs priced: `suggest gpt2 --seq 1024` said "4 fastest of 23
  shapes" of 5 shapes, and README's `suggest gpt3-2.7b --gpu h200 --top 3` "of 31 shapes" of 7. `considered` now
  counts the other shapes ("(0 considered)"; 5; 7), and the pairs only where --vary ranks them with the shapes
  (`--vary batch`: 23, "batch varied").
- `search --dtype fp32` (and tf32) was refused by argparse while the library's `search(workload=Workload(dtype=
  "fp32"))`, check, suggest and `plan --params --dtype fp32` price it: nothing in search needs bf16 (a V100's refusal
  was worded round the missing choice). search's --dtype takes every dtype check takes, and says fp32's caveat (no
  fused kernel takes it) as check does, the library's search() carrying it too.
- `check llama3-8b --mode decode --batch 65536 --seq 65536` was refused as "the tokens per step (batch × sequence
  length) must be at most 2,147,483,647 (a GEMM dim is a 32-bit int in cuBLAS)": a decoding step's GEMMs take 65,536
  tokens. In decode it says "the KV cache's tokens (batch × sequence length: the sequences served, each its cache of
  seq tokens)", whose bound is FlashAttention's variable-length kernels' 32-bit cache offsets (cu_seqlens_k).
- `search(..., attention="unfused")` from Python was told "unknown attention kind 'unfused'; use one of mha, gqa,
  mqa", leaving a user who meant the workload's attention no way to it: search's `attention` is the command's
  --attention-kind. A flash or unfused value is now refused naming Workload(attention=...); mha, gqa and mqa work as
  before.
- A config of model_type "llama" naming DeepseekV41ForCausalLM (a serving shim) was priced as a Llama without a word.
  Of 270 corpus files read, a rule "the class's stem is a known type other than model_type" warned on 8, every one
  honest (kimi_k2 files with DeepseekV3ForCausalLM, phi-msft with PhiForCausalLM, exaone4_5_text with
  Exaone4ForCausalLM, BitNet's llama with BitnetForCausalLM, which has its own note): not kept. The rule kept notes a
  class other than the type's under a type others' files borrow (llama, mistral, qwen2, qwen3), saying which class
  and which type it was read as; it warns on no corpus file.
- `Workload(batch=2**24, seq=2**24, mode="decod")` (a typo) was refused for its tokens, "the tokens per step", where
  the bound depends on the mode: the mode is checked first ("unknown mode 'decod'; use one of train, prefill,
  decode").
- `search(..., mlp="flash")` said "unknown MLP kind 'flash'; ..." where `attention="mla"` says "attention: unknown
  attention kind 'mla'; ...": the keyword is named first for mlp too.

Found consistent: plan's, verify's and report's refusals of counts, devices, formats and GPU counts that fill no whole node, each one
line with exit 2; a shim's note carried into check --json's warnings and the report's; the Python API's wrong types
(a name for a model, None for a GPU or a workload, text for a budget) refused in one line.

- search's command took no --attention (flash or unfused) though the library's search() prices
  Workload(attention="unfused") and check and suggest take the flag: `search --attention unfused` now prices it (a
  1e9 budget's fastest shape on an H200: 87,820 tokens/s fused, 55,318 unfused) and its --json says it.

Left alone: `--vary batch`
counts (shape, micro-batch) pairs as "23 shapes ... batch varied": the table it titles lists such pairs.
"""

from __future__ import annotations

import json
import warnings

import pytest

from helpers import read_config, run
from shapewise import ShapewiseError, Workload, get_model, search, suggest
from test_corpus import FILES

NO_REACH = ("hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab")  # gpt2 at seq 1024: no other shape in reach


def test_no_shape_within_reach_is_counted_as_none(capsys):
    code, out, _ = run(capsys, "suggest", "gpt2", "--gpu", "h100", "--seq", "1024", "--keep", ",".join(NO_REACH))
    assert code == 0 and "(0 considered): keep the shape (no other shape is within reach" in out
    code, out, _ = run(capsys, "suggest", "gpt2", "--gpu", "h100", "--seq", "1024", "--keep", ",".join(NO_REACH),
                       "--json")
    assert json.loads(out)["considered"] == 0


def test_considered_counts_shapes_not_their_micro_batches():
    gpt2, w = get_model("gpt2"), Workload(seq=1024)
    shapes = suggest(gpt2, w, gpu="h100").considered
    assert shapes == suggest(gpt2, w, gpu="h100", keep=("batch",)).considered == 5  # the same shapes, one batch
    assert suggest(gpt2, w, gpu="h100", vary=("batch",)).considered > shapes  # ranked with the shapes: counted


def test_search_takes_fp32_and_tf32_as_the_library_does(capsys):
    for dtype in ("fp32", "tf32"):
        code, out, err = run(capsys, "search", "--params", "1e9", "--gpu", "h100", "--dtype", dtype, "--top", "1",
                             "--json")
        assert code == 0, err
        given = json.loads(out)
        assert given["workload"]["dtype"] == dtype
        assert any(f"--dtype {dtype}: FlashAttention and cuDNN take only fp16 and bf16" in w for w in given["warnings"])
    result = search(params_target=1e9, gpu="h100", workload=Workload(seq=4096, dtype="tf32"), top=1)
    assert any(c.startswith("dtype tf32: FlashAttention") for c in result.caveats)
    assert not search(params_target=1e9, gpu="h100", workload=Workload(seq=4096), top=1).caveats


@pytest.mark.parametrize("mode, said", [
    ("decode", "the KV cache's tokens (batch × sequence length: the sequences served, each its cache of seq tokens) "
               "must be at most 2,147,483,647 (FlashAttention's variable-length kernels index a batch's cache by "
               "32-bit offsets)"),
    ("prefill", "the tokens per step (batch × sequence length) must be at most 2,147,483,647 (a GEMM dim is a 32-bit "
                "int in cuBLAS)"),
])
def test_a_decode_steps_cache_is_refused_as_a_cache(capsys, mode, said):
    code, out, err = run(capsys, "check", "llama3-8b", "--mode", mode, "--batch", "65536", "--seq", "65536")
    assert code == 2 and not out
    assert err == f"shapewise: error: --batch 65536 × --seq 65536 = 4,294,967,296 tokens: {said}\n"
    with pytest.raises(ShapewiseError, match="^workload: batch 65536 × seq 65536 = 4,294,967,296 tokens: " +
                       said.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        Workload(batch=65536, seq=65536, mode=mode)


@pytest.mark.parametrize("attention", ["flash", "unfused"])
def test_search_says_which_keyword_takes_the_workloads_attention(attention):
    with pytest.raises(ShapewiseError, match=rf"^attention: search's attention is the kv heads' kind \(mha, gqa or "
                                             rf"mqa; the command's --attention-kind\); {attention} attention is the "
                                             rf"workload's: Workload\(attention='{attention}'\)$"):
        search(params_target=1e9, gpu="h100", workload=Workload(seq=4096), attention=attention)
    result = search(params_target=1e9, gpu="h100", workload=Workload(seq=4096, attention=attention), attention="mqa",
                    top=1)
    assert result.top[0].workload.attention == attention and result.top[0].shape.kv_heads == 1


def _shim(tmp_path, cls: str, model_type: str = "llama"):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": model_type, "architectures": [cls], "hidden_size": 4096,
                                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                                "intermediate_size": 14336, "vocab_size": 128256}))
    return read_config(path)[1]


@pytest.mark.parametrize("cls, which", [
    ("DeepseekV41ForCausalLM", "a class shapewise does not know"),
    ("Qwen3MoeForCausalLM", "the class of model_type qwen3_moe, which the file would name to be read as it"),
])
def test_a_class_unlike_its_borrowed_type_is_said(tmp_path, cls, which):
    assert f"its architectures name {cls} ({which}) under model_type llama: read as llama; if its layers are not " \
           "llama's, the price is not the model's" in _shim(tmp_path, cls)


@pytest.mark.parametrize("cls, model_type", [("LlamaForCausalLM", "llama"), ("LLaMAForCausalLM", "llama"),
                                             ("DeepseekV3ForCausalLM", "kimi_k2")])
def test_a_class_of_its_own_type_or_an_honest_borrower_is_not(tmp_path, cls, model_type):
    assert not [w for w in _shim(tmp_path, cls, model_type) if "under model_type" in w]


def test_no_corpus_file_is_said_to_name_another_class():
    said = []
    for stem, path in FILES.items():
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            try:
                read_config(path)
            except ShapewiseError:
                continue  # refused files (Mamba and the like) say their own reason
        said += [stem for w in record if "under model_type" in str(w.message)]
    assert not said


def test_a_mistyped_mode_is_said_before_the_tokens_it_bounds():
    with pytest.raises(ShapewiseError, match=r"^unknown mode 'decod'; use one of train, prefill, decode$"):
        Workload(batch=2**24, seq=2**24, mode="decod")


def test_searchs_mlp_is_named_as_its_attention_is():
    with pytest.raises(ShapewiseError, match=r"^mlp: unknown MLP kind 'flash'; use one of gelu, relu, swiglu, geglu$"):
        search(params_target=1e9, gpu="h100", workload=Workload(seq=4096), mlp="flash")


def test_search_takes_the_workloads_attention_as_check_and_suggest_do(capsys):
    """search --attention unfused prices unfused attention (slower than fused), as the library's search() does."""
    speed = {}
    for attention in ("flash", "unfused"):
        code, out, err = run(capsys, "search", "--params", "1e9", "--attention", attention, "--top", "1", "--json")
        assert code == 0, err
        given = json.loads(out)
        assert given["workload"]["attention"] == attention
        speed[attention] = given["top"][0]["tokens_per_s_per_gpu"]
    library = search(params_target=1e9, gpu="h200", workload=Workload(batch=1, seq=4096, attention="unfused"), top=1)
    assert library.row(library.top[0])["tokens_per_s_per_gpu"] == pytest.approx(speed["unfused"])
    assert speed["unfused"] < 0.9 * speed["flash"]
