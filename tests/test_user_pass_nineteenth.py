"""What a new user's nineteenth pass over measuring and the results store found: a layout, backend or pass given
twice was measured, listed and counted twice, where a dim given twice is one case. A command whose output was piped
into a reader that stops early (`| head`) ended in a traceback. calibrate took --json and --cuda-graph and did nothing
with either, and validate took --cuda-graph and timed each call as without it; calibrate's and validate's --gpu were
helped as bench's "GPU to predict for beside each measurement". bench layer said nothing of spreads past 10% (bench gemm
and ops warn), nor, with --json, that it was interrupted; and it measured each forward op twice, once for each pass, and
counted 40 cases measured where the store held 29. `results --import ""` said "cannot read .: Is a directory", a
folder "cannot read DIR: Is a directory", and another results store "not a text file (not UTF-8)". A bench refused
before it measured anything (--cuda-graph on the CPU, no case that fits, no GPU) left a new empty store behind. bench
comm measured and listed a collective given twice twice, and two sizes made the same one. `bench gemm -m 1:4000 -n
1:4000 -k 1:4000` set out to make 64 billion cases and was not heard of again. An unknown --gpu was refused by bench
gemm, bench attention, calibrate and validate only once every case was measured. Unfused attention's score matrices
were left out of what a case needs, so a sequence whose scores outgrow the machine was allocated, not refused.
`validate --quick --device cpu --json` printed a sentence where a script reads JSON."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import interrupt_after, run

SRC = Path(__file__).parents[1] / "src"
FAST = ["--device", "cpu", "--warmup-ms", "0", "--budget-ms", "1"]


def test_a_value_given_twice_is_one_case(capsys, tmp_path):
    """`bench gemm -m 64 -n 64 -k 64 --layout nt tn nt` listed the nt case twice and said "3 measured" of two cases;
    `bench attention --backend math math --pass fwd fwd` listed one case four times. Each is one case, as `-m 64 64`
    was already."""
    pytest.importorskip("torch")
    db = ["--db", str(tmp_path / "r.db")]
    code, out, err = run(capsys, "bench", "gemm", "-m", "64", "-n", "64", "-k", "64", "--layout", "nt", "tn", "nt",
                         *db, *FAST)
    assert code == 0, err
    assert [line.split()[2] for line in out.splitlines() if line.startswith("gemm ")] == ["nt", "tn"], out
    assert "2 measured, 0 already in the store" in out, out
    code, out, err = run(capsys, "bench", "attention", "--heads", "2", "--head-dim", "16", "--seq", "32", "--batch",
                         "1", "--backend", "math", "math", "--pass", "fwd", "fwd", "--json", *db, *FAST)
    assert code == 0, err
    assert [row["params"]["backend"] for row in json.loads(out)] == ["math"], out


def test_a_reader_that_stops_early_is_no_traceback():
    """`shapewise check gpt2 --gpu h100 --json | head -1` (and `results --json`, `bench ... --json`, `validate
    --json`) ended in "BrokenPipeError: [Errno 32] Broken pipe" and its traceback once head had left. It ends quietly
    with 1, as the commands that print through rich's console already did."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    for argv in (["check", "gpt2", "--gpu", "h100", "--json"], ["models"]):
        proc = subprocess.Popen([sys.executable, "-m", "shapewise", *argv], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
        proc.stdout.close()  # the reader gone before a line was written
        err = proc.stderr.read().decode()
        proc.stderr.close()
        assert proc.wait() == 1 and err == "", err


def test_calibrate_and_validate_take_only_the_flags_they_use(capsys, tmp_path):
    """`calibrate --quick --device cpu --json` printed the same text as without it, and `calibrate --cuda-graph` and
    `validate --cuda-graph` measured each call as without it, on the CPU too, where bench refuses --cuda-graph.
    calibrate takes neither flag (argparse's one line); validate times graph replays with it, so on the CPU it is
    refused as bench refuses it. Their --gpu says what it is for: the GPU fitted for, the GPU judged."""
    code, out, err = run(capsys, "calibrate", "--help")
    text = " ".join(out.split())
    assert code == 0 and "--json" not in text and "--cuda-graph" not in text, text
    assert "--gpu GPU the GPU to fit the profile for (default: the one measured" in text, text
    code, out, err = run(capsys, "validate", "--help")
    assert "--gpu GPU the GPU whose models are judged (default: the one measured" in " ".join(out.split())
    for flag in ("--json", "--cuda-graph"):
        code, out, err = run(capsys, "calibrate", "--quick", "--device", "cpu", "--db", str(tmp_path / "c.db"), flag)
        assert code == 2 and out == "" and len(err.splitlines()) == 1, err
        assert f"unrecognized arguments: {flag}" in err, err
    pytest.importorskip("torch")
    code, out, err = run(capsys, "validate", "--quick", "--gpu", "h100", "--db", str(tmp_path / "v.db"), "--cuda-graph",
                         *FAST)
    assert code == 2 and out == "" and err == "shapewise: error: --cuda-graph needs a CUDA device\n", err


def _tiny(tmp_path) -> str:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                                "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 256,
                                "hidden_act": "silu"}))
    return str(path)


def test_bench_layer_says_wide_spreads_and_an_interruption(capsys, tmp_path, monkeypatch):
    """`bench layer tiny.json --device cpu` showed the whole layer's fwdbwd at 22 ms beside its fwd at 48 ms, the
    fwdbwd's spread (IQR) 600% of its median, without a word: bench gemm and bench ops say such spreads in one
    warning, and the layer's table has no IQR column. And `bench layer --json`, stopped by Ctrl-C, exited 130 with
    nothing said, where bench gemm --json says it on stderr. bench layer warns of both as the sweeps do."""
    pytest.importorskip("torch")
    from shapewise.measure import Timing

    monkeypatch.setattr("shapewise.measure.time_fn", lambda fn, **timing: Timing((1.0,) * 5 + (2.0,) * 5))
    argv = ("bench", "layer", _tiny(tmp_path), "--batch", "1", "--seq", "32", *FAST)
    for extra in ((), ("--json",)):
        code, out, err = run(capsys, *argv, "--db", str(tmp_path / f"r{len(extra)}.db"), *extra)
        assert code == 0 and len(err.splitlines()) == 1, err
        assert "29 of 29 cases measured with a spread (IQR) over 10% of their median (up to 67%)" in err, err
    interrupt_after(monkeypatch, 3)
    code, out, err = run(capsys, *argv, "--db", str(tmp_path / "i.db"), "--json")
    assert code == 130 and len(json.loads(out)) == 3, out
    assert "interrupted: 3 measured, 0 already in the store, 0 failed" in err and "kept in the store" in err, err


def test_bench_layer_measures_an_op_of_both_passes_once(capsys, tmp_path, monkeypatch):
    """`bench layer tiny.json --device cpu` said "40 measured" and `results` then counted 2 layer and 27 op rows: each
    forward op is a case of both passes (fwdbwd's and fwd's), and the sweep measured it twice, the second time over
    the first. Each key is measured once; both passes still sum it; the JSON lists it once."""
    pytest.importorskip("torch")
    from shapewise.measure import Timing

    timed = []

    def time_fn(fn, **timing):
        timed.append(1)
        return Timing((1.0,) * 10)

    monkeypatch.setattr("shapewise.measure.time_fn", time_fn)
    db = str(tmp_path / "r.db")
    argv = ("bench", "layer", _tiny(tmp_path), "--batch", "1", "--seq", "32", "--db", db, *FAST)
    code, out, err = run(capsys, *argv)
    assert code == 0 and "29 measured, 0 already in the store, 0 failed" in out and len(timed) == 29, out
    passes = {line.split()[0]: [c.strip() for c in line.split("│")] for line in out.splitlines()
              if line.split()[:1] in (["fwdbwd"], ["fwd"])}
    assert float(passes["fwd"][2]) == 12.0 and float(passes["fwdbwd"][2]) == 29.0, passes  # 1 ms × each op's count
    code, out, err = run(capsys, "results", "--db", db, "--json")
    assert json.loads(out)["benches"] == {"layer": {"ok": 2, "failed": 0}, "op": {"ok": 27, "failed": 0}}
    code, out, err = run(capsys, *argv, "--json")
    rows = json.loads(out)
    assert len(rows) == len({r["id"] for r in rows}) == 29, [r["label"] for r in rows]


def test_import_says_what_to_give_for_no_file_a_folder_or_a_store(capsys, tmp_path):
    """`results --import ""` said "cannot read .: Is a directory" (the empty path read as the working folder),
    `--import DIR` "cannot read DIR: Is a directory", and `--import other.db`, another results store the user meant to
    merge, "not a text file (not UTF-8)". Each says what to give: a file, the export in the folder, or the store
    exported first. None leaves a new store behind."""
    db = tmp_path / "new.db"
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    for given, said in (("", "give the export to import: --import FILE (a .csv, .json, .csv.gz or .json.gz"),
                        (str(tmp_path), f"{tmp_path} is a folder: give the export in it to import"),
                        (str(other), f"{other} is a SQLite database (a results store?), not an export: export it "
                                     f"first, `shapewise results --db {other} --export FILE.json`, and import that")):
        code, out, err = run(capsys, "results", "--db", str(db), "--import", given)
        assert code == 2 and out == "" and len(err.splitlines()) == 1 and said in err, err
    assert not db.exists()


def test_a_refused_bench_leaves_no_new_store_behind(capsys, tmp_path):
    """`bench gemm -m 8 -n 8 -k 8 --device cpu --cuda-graph --db new.db` was refused ("--cuda-graph needs a CUDA
    device") and left new.db behind, empty, which `results --db new.db` then called "an empty results store: nothing
    measured yet"; so did a sweep none of whose cases fits, and validate --cuda-graph on the CPU. A store the
    refused command made is taken back; one that was there, or that a run measured into, stays."""
    pytest.importorskip("torch")
    gemm = ("bench", "gemm", "-m", "8", "-n", "8", "-k", "8")
    for argv in ((*gemm, "--cuda-graph"), ("bench", "gemm", "-m", "1000000000", "-n", "64", "-k", "64"),
                 ("validate", "--quick", "--gpu", "h100", "--cuda-graph")):
        db = tmp_path / "new.db"
        code, out, err = run(capsys, *argv, "--db", str(db), *FAST)
        assert code == 2 and len(err.splitlines()) == 1, err
        assert not list(tmp_path.glob("new.db*")), err
    code, out, err = run(capsys, *gemm, "--db", str(db), *FAST)
    assert code == 0 and db.exists(), err
    code, out, err = run(capsys, *gemm, "--cuda-graph", "--db", str(db), *FAST)
    assert code == 2 and db.exists()
    code, out, err = run(capsys, "results", "--db", str(db), "--json")
    assert json.loads(out)["benches"] == {"gemm": {"ok": 1, "failed": 0}}, out


@pytest.mark.slow
def test_bench_comm_measures_a_collective_given_twice_once(tmp_path):
    """`torchrun --nproc-per-node 2 -m shapewise bench comm --device cpu --ops all_reduce all_reduce --sizes 1K 1001`
    listed all_reduce 1 KiB twice and 1000 B twice (1001 B made whole bf16 elements, 1000 B), each measured again over
    the first. Each op and size is one case."""
    pytest.importorskip("torch")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "shapewise",
               "bench", "comm", "--device", "cpu", "--ops", "all_reduce", "all_reduce", "--sizes", "1K", "1000", "1001",
               "--iters", "3", "--db", str(tmp_path / "comm.db"), "--json"]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout[done.stdout.index("["):])
    assert [(r["op"], r["bytes"]) for r in rows] == [("all_reduce", 1024), ("all_reduce", 1000)], rows


def test_a_sweep_of_billions_of_cases_is_refused_before_any_is_made(capsys, tmp_path):
    """`bench gemm -m 1:4000 -n 1:4000 -k 1:4000 --device cpu` (each flag within its 65,536 values) ran for minutes
    making 64,000,000,000 cases, never to measure one; `bench attention --heads 1:4000 --head-dim 1:4000 --seq 1:4000`
    the same. A sweep of more than 2^20 cases, each flag's values with every other's, is refused in one line."""
    db = tmp_path / "r.db"
    code, out, err = run(capsys, "bench", "gemm", "-m", "1:1025", "-n", "1:1024", "-k", "8", "--device", "cuda",
                         "--db", str(db))  # one row past the bound: refused before the device is asked for
    assert code == 2 and "a sweep of 1,049,600 cases" in err, err
    for argv in (("gemm", "-m", "1:4000", "-n", "1:4000", "-k", "1:4000"),
                 ("bmm", "-b", "1:2", "-m", "1:1024", "-n", "1:1024", "-k", "8"),
                 ("attention", "--heads", "1:4000", "--head-dim", "1:4000", "--seq", "1:4000")):
        code, out, err = run(capsys, "bench", *argv, "--db", str(db), *FAST)
        assert code == 2 and out == "" and len(err.splitlines()) == 1, err
        assert "cases (each flag's values with every other's): the cases of one sweep must be at most 1,048,576" in err
    assert "a sweep of 64,000,000,000 cases" in run(capsys, "bench", "gemm", "-m", "1:4000", "-n", "1:4000", "-k",
                                                    "1:4000", *FAST)[2]
    assert not db.exists()


def test_an_unknown_gpu_is_refused_before_anything_is_measured(capsys, tmp_path, monkeypatch):
    """`calibrate --quick --device cpu --gpu nope` measured the 42 cases of its set, then said "unknown GPU 'nope'"
    (a full calibrate on a GPU: minutes), and so did validate, bench gemm and bench attention, leaving a store of what
    they measured for nothing. Each refuses it first, measuring nothing."""
    pytest.importorskip("torch")
    import shapewise.bench as bench

    measured = []
    monkeypatch.setattr(bench, "_measure_one", lambda *args, **kwargs: measured.append(1))
    for argv in (("calibrate", "--quick"), ("validate", "--quick"), ("bench", "gemm", "-m", "8", "-n", "8", "-k", "8"),
                 ("bench", "attention", "--heads", "2", "--head-dim", "16", "--seq", "32")):
        code, out, err = run(capsys, *argv, "--gpu", "nope", "--db", str(tmp_path / "r.db"), *FAST)
        assert code == 2 and out == "" and err == "shapewise: error: unknown GPU 'nope' (`shapewise gpus` lists them)\n"
        assert measured == [] and not (tmp_path / "r.db").exists(), argv


def test_unfused_attention_counts_its_scores_in_what_it_needs(capsys, tmp_path, monkeypatch):
    """`bench attention --heads 1 --head-dim 16 --seq 131072 --backend unfused --device cpu` was let through as
    needing a few MB (q, k, v and the output), then asked the CPU for its 34 GB score matrices, twice over, on a
    machine of 25 GB: at best a failed allocation, at worst a machine swapped to a halt. What an unfused case needs
    counts its scores (batch × heads × seq², two going forward, four with the backward), so it is refused up front,
    and the fused one beside it is not."""
    pytest.importorskip("torch")
    import shapewise.bench as bench
    from shapewise.cases import attention_cases

    monkeypatch.setattr(bench, "device_memory_bytes", lambda device: 2**30)  # a 1 GiB device
    built = []
    monkeypatch.setattr(bench, "build", lambda case, device: built.append(case.label))
    unfused, fused = attention_cases(batches=[1], heads=[1], kv_heads=None, head_dims=[16], seqs=[16384],
                                     backends=["unfused", "default"], passes=["fwd"])
    assert bench.footprint(unfused) == bench.footprint(fused) + 2 * 16384**2 * 2
    code, out, err = run(capsys, "bench", "attention", "--heads", "1", "--head-dim", "16", "--seq", "16384", "--batch",
                         "1", "--backend", "unfused", "--db", str(tmp_path / "r.db"), *FAST)
    assert code == 2 and len(err.splitlines()) == 1 and built == [], err
    assert "none of the 2 cases fits the memory of the CPU: the largest, attention b1 h1/1 d16 s16384 unfused fwdbwd, " \
           "needs 2.2 GB for its tensors, the device has 1.1 GB" in err, err


def test_validate_json_on_the_cpu_without_a_gpu_prints_no_text_as_json(capsys, tmp_path):
    """`validate --quick --device cpu --json | python -c 'import json, sys; json.load(sys.stdin)'` failed: with no
    --gpu nothing is judged, and the sentence saying so went to stdout, where --json promises JSON. Under --json it
    goes to stderr, as an interruption's line does, and stdout holds nothing to misread."""
    pytest.importorskip("torch")
    argv = ("validate", "--quick", "--db", str(tmp_path / "r.db"), *FAST)
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0 and out == "", out
    assert "10 held-out cases measured on the CPU into the results store" in " ".join(err.split()), err
    code, out, err = run(capsys, *argv)  # the table's output: said on stdout, as before
    assert code == 0 and "nothing is judged without --gpu" in " ".join(out.split()) and err == "", err
