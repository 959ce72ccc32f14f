"""How fast `plan` enumerates and ranks layouts (spec model, no profile), best of three runs each.

    PYTHONPATH=src python3 benchmarks/plan_speed.py
"""

from shapewise.plan import plan
from shapewise.presets import get_model

CASES = (("llama2-7b", 64, 2**20, 4096), ("llama2-70b", 1024, 2**22, 4096), ("llama3-70b", 4096, 2**24, 8192),
         ("gpt3-175b", 1024, 1536 * 2048, 2048), ("mixtral-8x7b", 256, 2**22, 4096))

if __name__ == "__main__":
    print(f"{'model':14} {'GPUs':>6} {'layouts':>8} {'fit':>6} {'seconds':>8} {'layouts/s':>10}")
    for name, gpus, batch, seq in CASES:
        best = min((plan(get_model(name), gpus=gpus, gpu="h100", global_batch_tokens=batch, seq=seq)
                    for _ in range(3)), key=lambda r: r.seconds)
        print(f"{name:14} {gpus:6} {best.considered:8,} {best.fitting:6,} {best.seconds:8.3f} "
              f"{best.considered / best.seconds:10,.0f}")
