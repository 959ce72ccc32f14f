"""benchmarks/verify_real_summary.py reads the committed verify runs, gzipped, several at once."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).parent.parent
spec = importlib.util.spec_from_file_location("verify_real_summary", ROOT / "benchmarks" / "verify_real_summary.py")
summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(summary)


def test_summaries_of_gzipped_runs(capsys):
    runs = ROOT / "benchmarks" / "results"
    assert summary.main(str(runs / "h100-verify-fifth" / "verify-real-new.json.gz")) == 0
    out = capsys.readouterr().out
    assert "predicted within 3% of measured: 34 of 34 candidates" in out and "minicpmv" in out
