"""shapewise.document: the shareable report, HTML (self-contained) and Markdown (with PNGs beside it)."""

from __future__ import annotations

import base64
import html
import re
from html.parser import HTMLParser

import pytest

pytest.importorskip("matplotlib")

from shapewise.cases import op_case
from shapewise.document import build_report, write_report
from shapewise.errors import ShapewiseError
from shapewise.measure import Timing
from shapewise.presets import get_model
from shapewise.report import check
from shapewise.shapes import Workload
from shapewise.store import Store, case_key

PNG = b"\x89PNG\r\n\x1a\n"
H200_ENV = {"device": "cuda:0", "gpu_name": "NVIDIA H200", "driver_version": "570.1", "torch_version": "2.11.0+cu130",
            "cuda_version": "13.0", "cublas_version": "13.0.1"}


class Page(HTMLParser):
    """The parts of a page the tests look at: every tag with its attributes, the text, and table rows."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self._table = self._row = self._cell = None
        self._in_body = False
        self.scripts = 0
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "script":
            self.scripts += 1
        if tag == "table" and attrs.get("id"):
            self._table = self.tables.setdefault(attrs["id"], [])
        elif tag == "tbody" and self._table is not None:
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self._table.append(self._row)
            self._row = None
        elif tag == "table":
            self._table, self._in_body = None, False

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def attrs(self, tag: str) -> list[dict]:
        return [a for t, a in self.tags if t == tag]

    @property
    def ids(self) -> set:
        return {a["id"] for _, a in self.tags if "id" in a}


@pytest.fixture(scope="module")
def gpt2():
    return get_model("gpt2"), Workload()


@pytest.fixture(scope="module")
def page(gpt2):
    shape, workload = gpt2
    text = build_report(shape, workload, gpu="h200")
    return text, Page(text)


def test_html_fetches_nothing(page):
    text, parsed = page
    for tag, attrs in parsed.tags:
        for name in ("src", "href", "srcset", "action", "data", "poster"):
            value = (attrs.get(name) or "").strip().lower()
            assert not value.startswith(("http://", "https://", "//")), (tag, name, value[:80])
    assert not parsed.attrs("link") and not parsed.attrs("iframe")  # no style sheets, fonts or frames from anywhere
    assert all("src" not in a for a in parsed.attrs("script"))  # the one script is inline
    assert parsed.scripts == 1
    assert not re.search(r"url\(|@import", text)  # nothing pulled in by the CSS either
    csp = [a["content"] for a in parsed.attrs("meta") if a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in csp[0] and "img-src data:" in csp[0]
    assert len(text) < 1_000_000  # small enough to mail around


def test_images_are_embedded_pngs(page):
    _, parsed = page
    images = parsed.attrs("img")
    assert len(images) == 2  # the breakdown and the suggestions
    for img in images:
        prefix = "data:image/png;base64,"
        assert img["src"].startswith(prefix)
        data = base64.b64decode(img["src"][len(prefix):], validate=True)
        assert data.startswith(PNG) and len(data) > 1000
        assert img.get("alt")


def test_content_and_order(gpt2, page):
    text, parsed = page
    shape, workload = gpt2
    result = check(shape, workload, gpu="h200")
    words = html.unescape("".join(parsed.text))
    title = html.unescape(re.search(r"<title>(.*?)</title>", text).group(1))
    heading = html.unescape(re.search(r"<h1>(.*?)</h1>", text).group(1))
    assert title.startswith("gpt2 on NVIDIA H200") and re.search(r"\d{4}-\d{2}-\d{2}$", title)
    assert heading == "gpt2 on NVIDIA H200 SXM 141GB"
    assert result.model_source in words
    titles = [f.title for f in result.findings]
    assert any(f.rule == "vocab" for f in result.findings)
    for f in result.findings:
        assert f.title in words and f.fix in words
    assert [row[3] for row in parsed.tables["findings-table"]] == titles
    # one row per op of check(), in its order, with its label, shape and count
    ops = parsed.tables["op-table"]
    assert len(ops) == len(result.step.costs)
    assert [(r[0], r[1], r[2]) for r in ops] == [(c.op.label, c.op.shape_text, str(c.op.count)) for c in result.step.costs]
    assert f"{result.step.time_ms:,.2f}" in words and f"{result.step.mfu:.1%}" in words
    # what check says beside its step and memory: Adam's update (plan's step) and Megatron-LM's memory
    assert f"{result.step.time_ms + result.optimizer_ms:,.2f}" in words and "with Adam's update ms" in words
    assert f"{result.megatron_memory.total_bytes / 2**30:,.1f} GiB" in words
    for value in ("768", "50,257", "gelu", "layernorm", "flash", "bf16"):  # model and workload fields
        assert value in words
    assert parsed.tables["suggestions-table"] and "measured" not in parsed.ids
    # sections in the promised order
    order = ["model", "cost-model", "ops", "totals", "findings", "breakdown", "suggestions", "reproduce", "browser-check"]
    positions = [text.index(f'id="{name}"') for name in order]
    assert positions == sorted(positions)
    assert 'id="browser-check"' in text


def test_reproduce_commands(page):
    text, _ = page
    words = html.unescape(text)
    common = "--gpu h200 --batch 4 --seq 2048 --tp 1"
    assert f"shapewise check gpt2 {common} --mode train --dtype bf16 --attention flash" in words
    for mode in ("prefill", "decode"):
        assert f"shapewise check gpt2 {common} --mode {mode}" in words
    assert f"shapewise suggest gpt2 {common} --mode train --dtype bf16 --attention flash --top 5" in words
    assert f"shapewise report gpt2 {common} --mode train" in words and "--out report.html" in words
    assert "shapewise bench ops" not in words  # no measurements, no bench command


def test_reproduce_names_the_profile_used(gpt2, tmp_path):
    from shapewise import profile as profiles

    shape, workload = gpt2
    path = profiles.save(profiles.find("h200"), tmp_path / "my profile.json")
    text = html.unescape(build_report(shape, workload, gpu="h200", profile=profiles.load(path), top=1))
    assert f"shapewise check gpt2 --gpu h200 --batch 4 --seq 2048 --tp 1 --mode train --dtype bf16 --attention flash " \
           f"--profile '{path}'" in text
    shipped = html.unescape(build_report(shape, workload, gpu="h200", profile=profiles.find("h200"), top=1))
    assert "--profile" not in shipped  # the shipped profile is what the commands find by default


def test_text_is_escaped(gpt2):
    shape, workload = gpt2
    evil = shape.replace(name='<script>alert("x")</script> & <img src="https://evil.example/x.png">')
    text = build_report(evil, workload, gpu="h200", spec_only=True, top=1)
    parsed = Page(text)
    assert parsed.scripts == 1 and len(parsed.attrs("img")) == 2
    assert "<script>alert" not in text and "&lt;script&gt;alert(&quot;x&quot;)" in text
    words = html.unescape("".join(parsed.text))
    assert evil.name in words and "spec-only" in words
    assert "--spec-only" in html.unescape(text)  # the reproduce commands name the cost model used
    assert "--config CONFIG.json" in html.unescape(text)  # not a preset: say how to reproduce it


def test_markdown_writes_its_figures(gpt2, tmp_path):
    shape, workload = gpt2
    out = tmp_path / "sub" / "gpt2-h200.md"
    written = write_report(shape, workload, gpu="h200", out=out)
    assert written[0] == out and out.is_file()
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# gpt2 on NVIDIA H200")
    referenced = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text)
    assert referenced == ["gpt2-h200-breakdown.png", "gpt2-h200-suggestions.png"]
    for name in referenced:
        path = out.parent / name
        assert path.is_file() and path.read_bytes().startswith(PNG)
    assert sorted(written[1:]) == sorted(out.parent / n for n in referenced)
    assert "http://" not in text.replace(shape.source, "") and "data:" not in text
    result = check(shape, workload, gpu="h200")
    op_lines = [line for line in text.splitlines() if line.startswith("| ") and " | " in line]
    for c in result.step.costs:
        assert any(line.startswith(f"| {c.op.label} | {c.op.shape_text} |") for line in op_lines), c.op.label
    assert "vocab 50,257 is not a multiple of 64" in text
    assert "--format md" in text and "--out gpt2-h200.md" in text
    assert build_report(shape, workload, gpu="h200", fmt="md").count("](report-") == 2  # no out: report-*.png


def test_markdown_links_its_figures_whatever_the_file_is_named(gpt2, tmp_path):
    from urllib.parse import unquote

    shape, workload = gpt2
    out = tmp_path / "design review #2.md"
    write_report(shape, workload, gpu="h200", out=out, top=1)
    referenced = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", out.read_text(encoding="utf-8"))
    assert len(referenced) == 2  # a space or a # in the target breaks the link
    for target in referenced:
        assert "#" not in target and (tmp_path / unquote(target)).is_file()


def test_the_model_table_says_latent_attention_and_how_positions_are_given():
    from shapewise.document import _model_rows
    from shapewise.hf import load_config

    rows = dict(_model_rows(load_config("tests/data/hf/deepseek-v3.json")))
    assert rows["latent attention"] == ("key/value latent 512, query latent 1536; query/key head 192 (128 + 64 rotary), "
                                        "value head 128")
    assert "latent attention" not in dict(_model_rows(get_model("llama3-8b")))
    assert dict(_model_rows(load_config("tests/data/hf/bloom-7b1.json")))["positions"] == "no rotary (ALiBi, or none)"
    phi = dict(_model_rows(load_config("tests/data/hf/phi-2.json")))
    assert phi["rotary share of each head"] == "0.4"


def test_write_html(gpt2, tmp_path):
    shape, workload = gpt2
    written = write_report(shape, workload, gpu="h200", out=tmp_path / "r.html", top=2)
    assert written == [tmp_path / "r.html"] and list(tmp_path.iterdir()) == written
    parsed = Page(written[0].read_text(encoding="utf-8"))
    assert len(parsed.tables["suggestions-table"]) == 2
    with pytest.raises(ShapewiseError, match="format"):
        build_report(shape, workload, gpu="h200", fmt="pdf")


def _record_op(store, env, op, ms, dtype="bf16"):
    case = op_case(op, dtype)
    store.record(env_id=store.environment_id(env), bench="op", key=case_key({"bench": "op", **case.params}),
                 params=case.params, timing=Timing(samples_ms=(ms * 0.98, ms, ms * 1.03)), flops=case.flops,
                 bytes=case.bytes)


def test_measured_against_predicted(gpt2, tmp_path):
    shape, workload = gpt2
    costs = check(shape, workload, gpu="h200").step.costs
    qkv = next(c for c in costs if c.op.label == "attn/qkv")
    logits = next(c for c in costs if c.op.label == "logits")
    other = next(c for c in costs if c.op.label == "mlp/up")
    with Store(tmp_path / "results.db") as store:
        _record_op(store, H200_ENV, qkv.op, 0.5)
        _record_op(store, H200_ENV, logits.op, 6.0)
        _record_op(store, {**H200_ENV, "device": "cpu", "gpu_name": None, "processor": "AMD EPYC"}, other.op, 90.0)
        _record_op(store, H200_ENV, other.op, 1.0, dtype="fp16")  # another dtype than the step's
        text = build_report(shape, workload, gpu="h200", store=store)
        path = str(store.path)
    parsed = Page(text)
    assert "measured" in parsed.ids
    rows = parsed.tables["measured-table"]
    assert [r[0] for r in rows] == ["attn/qkv", "logits"]  # the step's order; CPU and fp16 rows left out
    assert rows[0][3] == "0.5000" and rows[0][4] == f"{qkv.time_ms:.4f}"
    assert rows[1][5] == f"{logits.time_ms / 6.0 - 1:+.1%}"
    assert "NVIDIA H200" in rows[0][6]
    words = html.unescape(text)
    assert "1 measurement of these ops on other devices is left out" in words
    assert "shapewise bench ops gpt2 --gpu h200 --batch 4 --seq 2048 --tp 1 --mode train" in words
    assert f"--db {path}" in words
    positions = [text.index(f'id="{name}"') for name in ("suggestions", "measured", "reproduce")]
    assert positions == sorted(positions)
    md = build_report(shape, workload, gpu="h200", store=Store(tmp_path / "results.db"), fmt="md")
    assert "## Measured against predicted" in md and "| attn/qkv |" in md


def test_measured_absent_without_matching_rows(gpt2, tmp_path):
    shape, workload = gpt2
    with Store(tmp_path / "results.db") as store:
        op = check(shape, workload.replace(batch=8), gpu="h200").step.costs[3].op  # another batch: other m
        _record_op(store, H200_ENV, op, 1.0)
        text = build_report(shape, workload, gpu="h200", store=store)
    assert 'id="measured"' not in text and "Measured against predicted" not in text
    assert "shapewise bench ops" not in text


def test_reproduce_names_a_store_only_where_it_is_not_the_default(gpt2, tmp_path, monkeypatch):
    # The default store is found without --db, and its path is the user's home: a shared report leaves it out.
    shape, workload = gpt2
    default = tmp_path / "home" / "results.db"
    monkeypatch.setenv("SHAPEWISE_DB", str(default))
    with Store(default) as store:
        text = html.unescape(build_report(shape, workload, gpu="h200", store=store, top=1))
    assert "--db" not in text and str(default) not in text
    other = tmp_path / "mine.db"
    with Store(other) as store:
        text = html.unescape(build_report(shape, workload, gpu="h200", store=store, top=1))
    assert f"--db {other}" in text


def test_the_report_says_what_reading_the_model_guessed(tmp_path, capsys):
    # a config of a type shapewise does not know is read by guessing: the shared report says so, as the
    # command line and --json do, under the model it describes
    from shapewise.cli import main

    out = tmp_path / "r.md"
    assert main(["report", "--config", "tests/data/hf-fifth/step-3.7-flash.json", "--out", str(out)]) == 0
    said = [line.removeprefix("shapewise: warning: ") for line in capsys.readouterr().err.splitlines()]
    text = out.read_text()
    assert any("it guessed" in line for line in said)
    for line in said:
        assert text.count(f"Warning: {line}") == 1
    assert text.index("Warning: ") < text.index("## Cost model")
    # nothing guessed and nothing assumed (gpt2 at s=2048 runs past its 1,024 positions, which the report says)
    assert "Warning" not in build_report(get_model("llama3-8b"), Workload(), gpu="h200", fmt="md")
