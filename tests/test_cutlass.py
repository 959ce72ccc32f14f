"""Misaligned GEMMs timed as the CUTLASS kernels cuBLAS runs for them: kernel names parsed, the
per-configuration fit recovers a known model from noisy synthetic measurements, rare kernels borrow,
which kernel cuBLAS picks is learned (the chooser), only misaligned 16-bit
GEMMs of the calibrated kinds are affected and say which kernel they are timed as, and the kernel
census stores what the profiler sees."""

import dataclasses

import numpy as np
import pytest

from shapewise import predict_gemm
from shapewise.corrections import CUTLASS_MIN_SLICE, CUTLASS_SPLITS, KERNEL_COLUMNS, cutlass_terms
from shapewise.cost import _gemm_arrays
from shapewise.fit import cutlass_config, fit_cutlass
from shapewise.hardware import get_gpu
from shapewise.params import SPEC
from shapewise.profile import CostModel, Profile, cost_model, find, load, save

H200 = get_gpu("h200")
# Two configurations of a made-up GPU's cuBLAS, as (name, occupancy, coefficients of CUTLASS_TERMS in ms).
SMALL = ("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_64x64_nn_align1>(Params)", 4,
         (0.005, 4e-6, 2e-5, 4e-4, 0.0, 0.0))
LARGE = ("void cutlass::Kernel2<cutlass_75_tensorop_s1688gemm_bf16_128x128_nn_align1>(Params)", 2,
         (0.006, 1.5e-5, 2.5e-5, 2e-3, 1e-9, 0.004))


def truth(m, n, k, small=lambda m, n, k: m * n < 2**20):
    """What the made-up cuBLAS runs for an nn GEMM with odd n (by default small outputs on 64×64 tiles,
    large ones on 128×128 with split-K as fast as it goes; where `small` says), and how long it takes."""
    name, occupancy, coef = SMALL if small(m, n, k) else LARGE
    tile = 64 if name is SMALL[0] else 128
    splits = np.array([s for s in CUTLASS_SPLITS if s == 1 or -(-k // s) >= CUTLASS_MIN_SLICE])
    if name is LARGE[0]:
        splits = splits[splits > 1] if (splits > 1).any() else splits
    times = cutlass_terms(m, n, k, 1, tile, tile, splits, occupancy, H200.num_sms) @ np.array(coef)
    best = int(np.argmin(times))
    return name, int(splits[best]), float(times[best])


def shapes(count, seed):
    rng = np.random.default_rng(seed)
    m, k = (np.round(2 ** rng.uniform(5, 13, count)).astype(int) for _ in range(2))
    n = np.round(2 ** rng.uniform(5, 13, count)).astype(int) // 2 * 2 + 1  # odd: an align1 kernel
    return list(zip(m.tolist(), n.tolist(), k.tolist()))


def measured(count, seed, noise=0.02, **rule):
    rng = np.random.default_rng(seed + 100)
    rows = []
    for m, n, k in shapes(count, seed):
        name, splits, ms = truth(m, n, k, **rule)
        rows.append({"m": m, "n": n, "k": k, "batch": 1, "layout": "nn", "time_ms": ms * np.exp(rng.normal(0, noise)),
                     "kernels": [name, "void cutlass::Kernel2<splitKreduce_kernel>"], "grids": [f"8x4x{splits}", "64x1x1"]})
    return rows


def batched(count, seed, batch=16):
    """Batched GEMMs the made-up cuBLAS runs on 64×64 tiles, unsplit, the batch over the grid's z."""
    name, occupancy, coef = SMALL
    rows = []
    for m, n, k in shapes(count, seed):
        ms = float(cutlass_terms(m, n, k, batch, 64, 64, 1, occupancy, H200.num_sms) @ np.array(coef))
        rows.append({"m": m, "n": n, "k": k, "batch": batch, "layout": "nn", "time_ms": ms, "kernels": [name],
                     "grids": [f"8x4x{batch}"]})
    return rows


def test_kernel_names_are_read_as_cuBLAS_spells_them():
    assert cutlass_config(SMALL[0]) == (0, 64, 64, 0, 0, 0)  # Turing kernels name no K block or stages
    assert cutlass_config(LARGE[0]) == (0, 128, 128, 1, 0, 0)  # fp32 partials: split-K with a reduction
    assert cutlass_config("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_64x3_nt_align2>"
                          "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_64x3_nt_align2::Params)") == (1, 256, 128, 0, 64, 3)
    assert cutlass_config("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_nn_align2>"
                          "(Params)") == (2, 32, 32, 0, 128, 2)
    # the Turing 32×32 WMMA kernel loads one element at a time: a family of its own
    assert cutlass_config("void cutlass::Kernel2<cutlass_75_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_nn_align1>"
                          "(Params)") == (3, 32, 32, 0, 32, 1)
    # Hopper's xmma kernels, which cuBLAS runs for some misaligned batched GEMMs: tile and K block
    assert cutlass_config("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cgasize1x1x1_warpgroupsize1x1x1_"
                          "execute_segment_k_off_kernel__5x_cublas") == (4, 128, 128, 0, 64, 0)
    assert cutlass_config("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT") is None
    assert cutlass_config("void splitKreduce_kernel<32, 16, int, float>") is None


def test_fit_recovers_known_kernels_and_predicts_held_out_shapes():
    params = fit_cutlass(measured(300, seed=0), SPEC, gpu=H200)
    kernels = {(row[1], row[3]): row for row in params.cutlass_kernels}
    assert set(kernels) == {(64, 0), (128, 1)} and len(params.cutlass_choices) == 300
    for (name, occupancy, coef), key in ((SMALL, (64, 0)), (LARGE, (128, 1))):
        row = kernels[key]
        assert row[0] == 0 and row[4] == 0 and row[5] == occupancy  # Turing, layout nn
        big = [i for i, c in enumerate(coef) if c > 1e-6]  # the terms that carry the time
        assert np.allclose(np.array(row[KERNEL_COLUMNS:])[big], np.array(coef)[big], rtol=0.25)
    held_out = shapes(200, seed=1)
    m, n, k = (np.array(x) for x in zip(*held_out))
    want = np.array([truth(*s)[2] for s in held_out])
    fitted = predict_gemm(m, n, k, layout="nn", gpu=CostModel(H200, params))
    err = np.abs(fitted.time_ms / want - 1)
    assert np.median(err) < 0.03 and np.percentile(err, 90) < 0.15
    spec = predict_gemm(m, n, k, layout="nn", gpu=CostModel(H200, SPEC))
    assert np.median(np.abs(spec.time_ms / want - 1)) > 5 * np.median(err)
    # each shape's tile is the one its nearest calibration shape ran
    tiles = np.array([64 if truth(*s)[0] == SMALL[0] else 128 for s in held_out])
    assert np.mean(fitted.tile[:, 0] == tiles) > 0.9


def test_batched_gemms_choose_among_batched_shapes():
    params = fit_cutlass(measured(120, seed=6) + batched(60, seed=7), SPEC, gpu=H200)
    assert sum(1 for row in params.cutlass_choices if row[5] > 0) == 60  # log2 batch kept
    held_out = batched(40, seed=8)
    m, n, k = (np.array([r[key] for r in held_out]) for key in "mnk")
    got = predict_gemm(m, n, k, batch=16, layout="nn", gpu=CostModel(H200, params))
    want = np.array([r["time_ms"] for r in held_out])
    assert np.median(np.abs(got.time_ms / want - 1)) < 0.03 and (got.split_k == 1).all()  # a batch is not split


def test_a_partial_tile_loads_only_its_filled_rows_and_columns():
    full = cutlass_terms(128, 128, 256, 1, 64, 64, 1, 2, H200.num_sms)  # 2×2 full tiles
    part = cutlass_terms(65, 65, 256, 1, 64, 64, 1, 2, H200.num_sms)  # 2×2 tiles, just over half full
    assert (np.delete(part, 1) == np.delete(full, 1)).all()  # the same tiles, k-steps and epilogues
    assert part[1] == pytest.approx(full[1] * 65 / 128)  # predicated-off rows and columns load nothing


def test_the_two_wmma_kernels_are_fitted_apart():
    """cuBLAS names a 32×32 WMMA kernel of one K block and stages for Turing (align1: odd dims) and for
    Ampere (align2: even ones); the align1 one is twice as slow, and each shape is timed as its own."""
    wmma = "void cutlass::Kernel2<cutlass_{}_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_nn_align{}>(Params)"
    coef = np.array((0.004, 4e-6, 2e-5, 2e-4, 0.0, 0.0))
    rows, held_out = [], []
    for i, (m, n, k) in enumerate(shapes(160, seed=9)):
        odd = i % 2 == 0
        m, k = m // 8 * 8 + 2, k // 8 * 8 + 2  # even, never 8-aligned
        n = n if odd else n + 1  # shapes() draws odd n: every other one made even
        scale = 2.0 if odd else 1.0
        ms = float(cutlass_terms(m, n, k, 16, 32, 32, 1, 3, H200.num_sms) @ coef) * scale
        (rows if i < 120 else held_out).append(
            {"m": m, "n": n, "k": k, "batch": 16, "layout": "nn", "time_ms": ms, "grids": ["8x4x16"],
             "kernels": [wmma.format(75, 1) if odd else wmma.format(80, 2)]})
    params = fit_cutlass(rows, SPEC, gpu=H200)
    assert sorted(row[0] for row in params.cutlass_kernels) == [2, 3]  # Ampere WMMA, Turing WMMA
    m, n, k = (np.array([r[key] for r in held_out]) for key in "mnk")
    got = predict_gemm(m, n, k, batch=16, layout="nn", gpu=CostModel(H200, params))
    want = np.array([r["time_ms"] for r in held_out])
    assert np.median(np.abs(got.time_ms / want - 1)) < 0.05
    assert {int(f) for f in got.family[n % 2 == 1]} == {3} and {int(f) for f in got.family[n % 2 == 0]} == {2}


def test_only_misaligned_gemms_of_the_calibrated_kinds_use_the_kernels():
    params = fit_cutlass(measured(120, seed=2), SPEC, gpu=H200)
    m, n, k = np.array([512, 4096, 333, 1024]), np.array([1024, 4096, 1001, 2048]), np.array([256, 4096, 777, 64])
    for layout, batch in (("nn", 1), ("nn", 8), ("nt", 1), ("tn", 1)):
        with_tables = predict_gemm(m, n, k, batch=batch, layout=layout, gpu=CostModel(H200, params))
        without = predict_gemm(m, n, k, batch=batch, layout=layout, gpu=CostModel(H200, SPEC))
        changed = with_tables.time_ms != without.time_ms
        # n = 1001 is odd; the tables hold nn single GEMMs only, so only those change
        assert changed.tolist() == [False, False, layout == "nn" and batch == 1, False]
    fp8 = [_gemm_arrays(333, 1001, 777, 1, "nn", H200, "fp8", q)["time_ms"] for q in (params, SPEC)]  # a step's dgrad
    assert fp8[0] == fp8[1]  # the tables are of 16-bit GEMMs
    one = predict_gemm(333, 1001, 777, layout="nn", gpu=CostModel(H200, params))
    assert sum(one.losses.values()) == pytest.approx(one.time_ms - one.flops / (one.peak_tflops * 1e9), rel=1e-9)
    assert one.losses["misalign"] > 0


def test_the_shipped_profile_agrees_with_itself_one_shape_at_a_time():
    params = find("h200").params
    assert params.cutlass_kernels and params.cutlass_choices
    rng = np.random.default_rng(5)
    m, n, k = (rng.integers(16, 8192, 64) for _ in range(3))
    layouts = rng.choice(["nn", "nt", "tn"], 64)
    many = predict_gemm(m, n, k, layout=layouts, gpu=CostModel("h200", params))
    for i in range(64):
        one = predict_gemm(int(m[i]), int(n[i]), int(k[i]), layout=str(layouts[i]), gpu=CostModel("h200", params))
        # the same sums one shape at a time, but their single-precision weights add up in another order
        assert one.time_ms == pytest.approx(float(many.time_ms[i]), rel=1e-6)
        assert one.tile == tuple(int(x) for x in many.tile[i]) and one.split_k == int(many.split_k[i])


def test_kernel_tables_round_trip_through_a_profile_file(tmp_path):
    params = fit_cutlass(measured(60, seed=3), SPEC, gpu=H200)
    back = load(save(Profile(gpu="h200", params=params), tmp_path / "p.json"))
    assert back.params.cutlass_kernels == params.cutlass_kernels
    assert back.params.cutlass_choices == params.cutlass_choices


def test_the_census_names_nothing_on_a_cpu(tmp_path):
    pytest.importorskip("torch")
    from shapewise.bench import kernel_census
    from shapewise.cases import KERNELS, gemm_cases
    from shapewise.store import Store

    with Store(tmp_path / "r.db") as store:
        assert kernel_census(gemm_cases([64], [65], [64]), store=store, device="cpu") == 0
        assert store.rows(bench=KERNELS) == []


@pytest.mark.gpu
def test_the_census_names_cuBLAS_kernels_on_a_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from shapewise.bench import census_rows, kernel_census
    from shapewise.cases import gemm_cases
    from shapewise.store import Store

    cases = gemm_cases([1024], [1025, 1024], [512])
    with Store(tmp_path / "r.db") as store:
        assert kernel_census(cases, store=store, device="cuda", progress=False) == 2
        assert kernel_census(cases, store=store, device="cuda", progress=False) == 0  # resumes: nothing left
        found = census_rows(store)
    misaligned, aligned = (found[c.key] for c in cases)
    assert any(cutlass_config(name) for name in misaligned["kernels"])  # odd n: a CUTLASS align1 kernel
    assert aligned["kernels"] and all(g.count("x") == 2 for g in aligned["grids"])


def test_the_choices_residuals_correct_what_the_kernel_terms_miss():
    # The "GPU" runs GEMMs with long K 25% slower than the kernel terms say: the residuals learn it.
    rows = measured(300, seed=4, noise=0.0)
    for r in rows:
        r["time_ms"] *= 1.25 if r["k"] > 1024 else 1.0
    params = fit_cutlass(rows, SPEC, gpu=H200)
    bare = dataclasses.replace(params, cutlass_choices=tuple(r[:7] + (0.0,) for r in params.cutlass_choices))
    held_out = [s for s in shapes(300, seed=5) if s[2] > 2048]
    m, n, k = (np.array(x) for x in zip(*held_out))
    want = np.array([truth(*s)[2] for s in held_out]) * 1.25
    err = lambda p: np.median(np.abs(predict_gemm(m, n, k, layout="nn", gpu=CostModel(H200, p)).time_ms / want - 1))
    assert err(bare) > 0.05 and err(params) < err(bare) / 2


def test_a_rare_kernel_borrows_a_fitted_ones_coefficients_scaled():
    # Three GEMMs ran a 64×128 kernel: too few to fit, so it takes the 64×64 one's terms, 30% slower.
    rare_name = SMALL[0].replace("64x64", "64x128")
    rows = measured(120, seed=9, noise=0.0)
    rare = []
    for m, n, k in ((300, 2001, 96), (700, 1501, 120), (500, 3001, 64)):  # K too short to split
        ms = 1.3 * float(cutlass_terms(m, n, k, 1, 64, 128, 1, SMALL[1], H200.num_sms) @ np.array(SMALL[2]))
        rare.append({"m": m, "n": n, "k": k, "batch": 1, "layout": "nn", "time_ms": ms, "kernels": [rare_name],
                     "grids": ["4x4x1"]})
    params = fit_cutlass(rows + rare, SPEC, gpu=H200)
    borrowed = [row for row in params.cutlass_kernels if row[1:3] == (64, 128)]
    assert len(borrowed) == 1 and borrowed[0][5] == SMALL[1]  # the donor's occupancy
    donor = next(row for row in params.cutlass_kernels if row[1:4] == (64, 64, 0))
    theirs, mine = np.array(donor[KERNEL_COLUMNS:]), np.array(borrowed[0][KERNEL_COLUMNS:])
    scale = mine[theirs > 0] / theirs[theirs > 0]
    assert np.allclose(scale, scale[0], rtol=1e-4) and (mine[theirs == 0] == 0).all()  # one factor for all terms
    from shapewise.corrections import kernel_times as _kernel_times

    times, _ = _kernel_times(np.array(borrowed), *(np.array([x]) for x in (700, 1501, 120, 1)), H200.num_sms)
    assert float(times[0, 0]) == pytest.approx(rare[1]["time_ms"], rel=0.05)  # its own time, from the donor's terms
    got = predict_gemm(700, 1501, 120, layout="nn", gpu=CostModel(H200, params))
    assert tuple(got.tile) == (64, 128) and got.time_ms == pytest.approx(rare[1]["time_ms"], rel=0.1)


def test_the_census_stores_names_resumes_and_keeps_failures(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from shapewise import bench
    from shapewise.bench import census_rows, kernel_census
    from shapewise.cases import KERNELS, gemm_cases
    from shapewise.store import Store

    # The profiler's part runs on the CPU too (no GPU kernels to see, and the failure kept) ...
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    huge = gemm_cases([2**40], [2], [2])[0]
    seen = bench._kernels_of(torch, [*gemm_cases([64], [65], [64]), huge], "cpu")
    assert seen[0] == ([], [], None) and seen[1][:2] == ([], []) and "allocate" in seen[1][2]
    # ... and the census stores what the profiler saw, as a GPU would show it.
    fake = {64: ([LARGE[0], "splitKreduce_kernel"], ["8x2x3", "16x1x1"], None), 128: ([], [], "OutOfMemoryError: x")}
    monkeypatch.setattr(bench, "_kernels_of", lambda torch, cases, device: [fake[c.params["m"]] for c in cases])
    monkeypatch.setattr("shapewise.measure.environment", lambda device: {"device": device, "gpu_name": "test"})
    cases = gemm_cases([64, 128], [65], [64])
    with Store(tmp_path / "r.db") as store:
        assert kernel_census(cases, store=store, device="cuda", progress=False) == 1
        assert kernel_census(cases, store=store, device="cuda", progress=False) == 0  # named: not again
        named = census_rows(store)
        failed = [r for r in store.rows(bench=KERNELS) if r["error"]]
    assert named == {cases[0].key: {"kernels": fake[64][0], "grids": fake[64][1]}}
    assert [r["error"] for r in failed] == ["OutOfMemoryError: x"]  # kept with its reason, tried again next time


def test_the_fit_learns_which_kernel_cublas_picks():
    # A made-up cuBLAS that picks by the output's shape (tall or wide), whichever kernel would run faster:
    # both kernels run shapes of every size, so only what the chooser learns can tell them apart.
    tall = dict(small=lambda m, n, k: m < n)
    report = {}
    params = fit_cutlass(measured(300, seed=10, **tall), SPEC, gpu=H200, report=report)
    assert report["chooser_cases"] == 300 and report["chooser_right"] >= 0.9
    held_out = shapes(200, seed=11)
    m, n, k = (np.array(x) for x in zip(*held_out))
    want = np.where(m < n, 64, 128)
    assert np.mean(predict_gemm(m, n, k, layout="nn", gpu=CostModel(H200, params)).tile[:, 0] == want) >= 0.9
    # unlearned (every score alike), it would be right about half the time
    blind = dataclasses.replace(params, cutlass_chooser=tuple((0.0,) * len(row) for row in params.cutlass_chooser),
                                cutlass_chooser_vote=0.0, cutlass_chooser_sharpness=0.0)
    assert np.mean(predict_gemm(m, n, k, layout="nn", gpu=CostModel(H200, blind)).tile[:, 0] == want) < 0.8


def test_a_kernel_is_a_candidate_only_near_the_shapes_it_ran():
    from shapewise.corrections import CANDIDATE_REACH, kernel_ranges, within_range

    # two configurations: one ran K of 32 to 64 alone, the other K of 256 to 4096
    choices = np.array([[0, 2, 10, 10, k, 0, row, 0.0] for row, ks in ((0, (5, 6)), (1, (8, 12))) for k in ks])
    ranges = kernel_ranges(choices, 2)
    assert ranges[0, :, 2].tolist() == [5, 6] and ranges[1, :, 2].tolist() == [8, 12]
    log_k = np.array([5.5, 6 + CANDIDATE_REACH, 7.5, 11, 20])
    inside = within_range(ranges, np.column_stack([np.full(5, 10.0), np.full(5, 10.0), log_k, np.zeros(5)]))
    assert inside.tolist() == [[True, False], [True, True], [False, True], [False, True], [True, True]]
    # (K of 2^20 is near neither: then both count)


def test_a_time_is_the_geometric_mean_of_the_kernels_by_their_probabilities():
    from shapewise.corrections import kernel_times as _kernel_times

    params = fit_cutlass(measured(200, seed=10, noise=0.05), SPEC, gpu=H200)
    # no corrections, every score alike: each of the two configurations has probability 1/2
    even = dataclasses.replace(params, cutlass_chooser=tuple((0.0,) * len(row) for row in params.cutlass_chooser),
                               cutlass_chooser_vote=0.0, cutlass_chooser_sharpness=0.0,
                               cutlass_choices=tuple(row[:7] + (0.0,) for row in params.cutlass_choices))
    m, n, k = 1001, 3003, 517
    times, _ = _kernel_times(np.array(params.cutlass_kernels), *(np.array([x]) for x in (m, n, k, 1)), H200.num_sms)
    assert predict_gemm(m, n, k, layout="nn", gpu=CostModel(H200, even)).time_ms == pytest.approx(
        float(np.exp(np.log(times).mean())), rel=1e-9)
    # sharp on time alone, it takes the faster one
    sharp = dataclasses.replace(even, cutlass_chooser_sharpness=1e3)
    assert predict_gemm(m, n, k, layout="nn", gpu=CostModel(H200, sharp)).time_ms == pytest.approx(float(times.min()), rel=1e-6)


def test_an_fp32_partials_kernel_always_runs_split():
    # K of 40 is too short for two 64-long slices: the kernel still splits (as cuBLAS does), into
    # short slices, and pays for its reduction kernel; a kernel with bf16 output does not split.
    from shapewise.corrections import kernel_times as _kernel_times

    partials = [0, 64, 64, 1, 0, 1, 0, 0, 0.005, 1e-6, 0.0, 0.0, 1e-9, 0.004]  # launch, k-steps, …, reduction launch
    rows = np.array([partials, partials[:3] + [0] + partials[4:]])
    times, splits = _kernel_times(rows, np.array([70]), np.array([120]), np.array([40]), np.array([1]), 132)
    assert splits[0, 0] > 1 and -(-40 // splits[0, 0]) >= 8  # split, in slices of 8 or more
    assert times[0, 0] > 0.005 + 0.004  # the launch and the reduction's launch
    assert splits[0, 1] == 1 and times[0, 1] < 0.006


def test_a_misaligned_gemm_says_which_kernel_it_is_timed_as(capsys):
    import json

    from shapewise.cli import main
    from shapewise.corrections import CUTLASS_FAMILIES, kernel_words

    assert kernel_words(0, (128, 256), 3) == "Turing CUTLASS align1, 128×256 tiles, K split 3 ways"
    assert kernel_words(-1, (128, 256), 1) == "modelled kernel, 128×256 tiles"
    odd, aligned = (predict_gemm(8192, n, 768, layout="nt", gpu="h200") for n in (50257, 50304))
    assert CUTLASS_FAMILIES[odd.family].startswith("Turing") and aligned.family == -1
    assert main(["check", "gpt2", "--gpu", "h200", "--json"]) == 0
    ops = [op for op in json.loads(capsys.readouterr().out)["ops"] if op["kind"] == "gemm"]
    assert all(op["kernel"].startswith("Turing CUTLASS align1" if op["name"] == "logits" else "modelled kernel")
               for op in ops)


def test_a_profiles_correction_is_its_own_part_and_the_causes_stay():
    """With the shipped profile, a misaligned GEMM timed as its CUTLASS kernel loses to misalignment what
    that kernel takes over the aligned GEMM's analytic time; an aligned GEMM keeps the analytic causes,
    and what the trees add is the measured correction, not a stretch of every loss."""
    spec, profiled = CostModel("h200"), cost_model("h200")
    odd = predict_gemm(8192, 50257, 768, layout="nt", gpu=profiled)
    aligned_spec = predict_gemm(8192, 50304, 768, layout="nt", gpu=CostModel("h200", dataclasses.replace(
        profiled.params, gemm_residuals=(), gemm_trees=(), cutlass_kernels=(), cutlass_choices=(), cutlass_chooser=())))
    aligned = predict_gemm(8192, 50304, 768, layout="nt", gpu=profiled)
    assert odd.main_loss == "misalign" and odd.losses["misalign"] > 0.5 * odd.time_ms
    for name in ("kernel", "tile", "wave", "memory", "launch"):  # the analytic causes, unscaled
        assert aligned.losses[name] == pytest.approx(aligned_spec.losses[name], rel=1e-12, abs=1e-15)
    assert aligned.losses["correction"] == pytest.approx(aligned.time_ms - aligned_spec.time_ms, rel=1e-9)
    assert predict_gemm(8192, 50304, 768, layout="nt", gpu=spec).losses["correction"] == 0


def test_bench_names_the_kernels_beside_the_timings(tmp_path, capsys):
    from types import SimpleNamespace

    from shapewise.bench import Bench
    from shapewise.cases import gemm_cases, kernel_label
    from shapewise.cli import main
    from shapewise.cli.bench import _render_sweep

    assert kernel_label([LARGE[0], "void cublasLt::splitKreduce_kernel<32, 16, int, float>(cublasLt::Params<float>)"]) \
        == "cutlass_75_tensorop_s1688gemm_bf16_128x128_nn_align1 + splitKreduce_kernel"
    case = gemm_cases([64], [65], [64])[0]
    row = {"median_ms": 0.01, "iqr_ms": 0.001, "tflops": 0.05, "gbps": 3.0, "error": None}
    result = SimpleNamespace(rows=[(case, row)], environment={"gpu_name": "test"}, interrupted=False,
                             summary=lambda: "1 measured")
    bench = Bench(result, [(case, row, None)], {case.key: {"kernels": [LARGE[0]], "grids": ["8x2x3"]}})
    _render_sweep(SimpleNamespace(json=False, device="cuda"), bench)
    assert "cutlass_75_tensorop_s1688gemm_bf16_128x128_nn_align1" in capsys.readouterr().out
    _render_sweep(SimpleNamespace(json=True, device="cuda"), bench)
    assert '"grids": [\n      "8x2x3"' in capsys.readouterr().out
    # on the CPU there are no GPU kernels to name: said at once, in one line, before measuring anything
    assert main(["bench", "gemm", "-m", "64", "-n", "65", "-k", "64", "--device", "cpu", "--kernels", "--db",
                 str(tmp_path / "r.db")]) == 2
    assert "CUDA device" in capsys.readouterr().err and not (tmp_path / "r.db").exists()


def test_named_shapes_teach_the_chooser_without_their_times():
    # A few timed choices leave the chooser unsure where a made-up cuBLAS's border between its kernels lies;
    # shapes whose kernels were named but not timed (fit_chooser's `named`) teach it where, while the
    # candidates, their ranges and the neighbours' votes stay the timed choices' own.
    from shapewise.cost import align_classes
    from shapewise.fit import fit_chooser

    tall = dict(small=lambda m, n, k: m < n)
    params = fit_cutlass(measured(16, seed=20, **tall), SPEC, gpu=H200)
    choices = np.array(params.cutlass_choices).reshape(-1, 8)[:, :7]
    chosen = [dict(zip(("m", "n", "k", "batch"), np.round(2 ** r[2:6]).astype(int).tolist())) for r in choices]
    row_of = {int(row[1]): i for i, row in enumerate(params.cutlass_kernels)}  # its tile's rows: one each here
    assert sorted(row_of) == [64, 128] and len(params.cutlass_kernels) == 2
    named = ([], [])
    for m, n, k in shapes(400, seed=21):
        name, _, _ = truth(m, n, k, **tall)
        worst = int(max(align_classes(m, n, k, "nn", "bf16", 16)))
        named[0].append((0, worst, *np.log2([m, n, k, 1]).round(4), row_of[64 if name is SMALL[0] else 128]))
        named[1].append(dict(m=m, n=n, k=k, batch=1))
    fitting = dict(gpu=H200, octaves=params.residual_octaves, prior=params.residual_prior)
    # without names, the refit is the fit's own chooser
    alone = fit_chooser(params.cutlass_kernels, choices, chosen, **fitting)
    assert alone == (params.cutlass_chooser, params.cutlass_chooser_sharpness, params.cutlass_chooser_vote)
    chooser, sharpness, vote = fit_chooser(params.cutlass_kernels, choices, chosen, named=named, **fitting)
    taught = dataclasses.replace(params, cutlass_chooser=chooser, cutlass_chooser_sharpness=sharpness,
                                 cutlass_chooser_vote=vote)
    m, n, k = (np.array(x) for x in zip(*shapes(300, seed=22)))
    want = np.where(m < n, 64, 128)

    def right(p):
        return np.mean(predict_gemm(m, n, k, layout="nn", gpu=CostModel(H200, p)).tile[:, 0] == want)

    assert right(taught) >= 0.9 and right(taught) > right(params) + 0.05, (right(params), right(taught))
