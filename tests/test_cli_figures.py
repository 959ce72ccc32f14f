"""The plot, report and results --import commands, end to end."""

import json

import pytest

from helpers import run

pytest.importorskip("matplotlib")




@pytest.mark.parametrize("argv", [
    ["plot", "gemm", "--values", "4088:4104", "-m", "4096", "-k", "4096"],
    ["plot", "attention", "--hiddens", "1024:4096:256", "--heads", "16"],
    ["plot", "attention", "--hiddens", "1024:4096:256", "--heads", "16", "--kind", "bmm"],
    ["plot", "attention-heads", "--head-dim", "128", "--head-counts", "8:32:8"],
    ["plot", "layer", "--hiddens", "1024", "2048", "--head-counts", "16", "32"],
    ["plot", "breakdown", "gpt2"],
    ["plot", "suggestions", "gpt3-2.7b", "--top", "3"],
])
def test_every_figure_is_written(capsys, tmp_path, argv):
    out = tmp_path / "figure.png"
    code, stdout, err = run(capsys, *argv, "--out", str(out))
    assert code == 0, err
    assert out.read_bytes()[:4] == b"\x89PNG" and str(out) in stdout


def test_plot_rejects_an_unknown_format(capsys, tmp_path):
    code, _, err = run(capsys, "plot", "breakdown", "gpt2", "--out", str(tmp_path / "figure.jpg"))
    assert code == 2 and err.count("\n") == 1


def test_measurements_travel_through_an_export_and_into_a_figure(capsys, tmp_path):
    db = str(tmp_path / "a.db")
    fast = ["--device", "cpu", "--warmup-ms", "1", "--budget-ms", "2"]
    assert run(capsys, "bench", "gemm", "-m", "64", "-n", "60:68", "-k", "64", "--db", db, *fast)[0] == 0
    assert run(capsys, "results", "--db", db, "--export", str(tmp_path / "x.csv"))[0] == 0
    other = str(tmp_path / "b.db")
    code, out, _ = run(capsys, "results", "--db", other, "--import", str(tmp_path / "x.csv"))
    assert code == 0 and "imported 9 rows" in out
    code, out, _ = run(capsys, "results", "--db", other, "--json")
    assert json.loads(out)["benches"]["gemm"]["ok"] == 9


def test_report_command_writes_html_and_markdown(capsys, tmp_path):
    code, out, _ = run(capsys, "report", "gpt2", "--gpu", "h200", "--out", str(tmp_path / "r.html"))
    assert code == 0 and (tmp_path / "r.html").read_text().count("data:image/png;base64,") >= 2
    code, out, _ = run(capsys, "report", "gpt2", "--gpu", "h200", "--out", str(tmp_path / "r.md"))
    assert code == 0 and (tmp_path / "r.md").exists() and list(tmp_path.glob("r-*.png"))


def test_a_verify_run_is_drawn_as_measured(capsys, tmp_path):
    from shapewise import plots

    rows = json.loads(open("benchmarks/results/h200-verify/verify-gpt3-2.7b.json").read())
    data = plots.verified_data(rows, model="gpt3-2.7b", gpu="h200")
    assert list(data["measured_speedup"][1:]) == [r["measured_speedup"] for r in rows] and data["labels"][0] == "original"
    code, out, err = run(capsys, "plot", "suggestions", "gpt3-2.7b", "--verified",
                         "benchmarks/results/h200-verify/verify-gpt3-2.7b.json", "--out", str(tmp_path / "v.png"))
    assert code == 0, err
    (tmp_path / "bad.json").write_text("{}")
    code, _, err = run(capsys, "plot", "suggestions", "gpt2", "--verified", str(tmp_path / "bad.json"), "--out",
                       str(tmp_path / "w.png"))
    assert code == 2 and "not the output" in err
