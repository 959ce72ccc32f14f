"""The GEMM trees (fit.fit_trees, 100 at 0.2) with more questions than corrections.TREE_FEATURES asks:
"bytes" (the analytic bytes' rate), "ktwos" (how many times 2 divides K), "minside" (the smallest
side), alone or joined by "+". With `cv`: each 5-fold cross-validated on the calibration's GEMMs
(all, and those with a side of 16 or less); without: fitted on all and judged on the wide sets 34
and 35 and the models sets 16 and 17 (seen) and the held-out designed sets (RESULTS, fourteenth
freeze: none kept).

PYTHONPATH=src:benchmarks python benchmarks/archive/tree_features.py cv [KIND ...]   (about 2 minutes)
PYTHONPATH=src:benchmarks python benchmarks/archive/tree_features.py base bytes ...
"""
import sys, dataclasses, glob, time
sys.path.insert(0,'benchmarks')
import numpy as np
from refit_profile import averaged, rows_from_export
from tree_choices import measured, errors
import shapewise.corrections as corr
import shapewise.fit as fit
from shapewise.calibrate import _gemm_rows
from shapewise.fit import GemmSamples
from shapewise.hardware import get_gpu
from shapewise.judges import judge_set_cases
from shapewise.profile import CostModel, find
R='benchmarks/results'
shipped=find('h200'); gpu=get_gpu(shipped.gpu)
calibration=GemmSamples.from_rows(_gemm_rows(averaged([rows_from_export(p) for p in shipped.fit['refitted_from']])))
w34={c.key for c in judge_set_cases('wide', seed=34).cases}; w35={c.key for c in judge_set_cases('wide', seed=35).cases}
f13=f'{R}/h200-judges-fresh13/judges.csv.gz'; f14=f'{R}/h200-judges-fresh14/judges.csv.gz'
sets={'wide 34+35': measured([f13,f14], lambda k: k in w34 or k in w35),
      'models 16+17': measured([f13,f14], lambda k: k not in w34 and k not in w35),
      'held-out 2-19': measured(sorted(glob.glob(f'{R}/h200-calibration/validation-seed*.csv'))+[f'{R}/h200-calibration/validation.csv'], lambda k: True)}
bare=dataclasses.replace(shipped.params, gemm_residuals=(), gemm_trees=(), gemm_tree_base=0.0)
orig=corr.tree_features
def extra(kind):
    def f(m, n, k, batch, layout_index, time_ms):
        base=orig(m, n, k, batch, layout_index, time_ms)
        m_, n_, k_, b_, t_ = (np.ravel(x).astype(float) for x in np.broadcast_arrays(m, n, k, batch, time_ms))
        cols=[base]
        if 'bytes' in kind: cols.append(np.log2((m_*k_+k_*n_+m_*n_)*b_*2/t_/1e6)[:,None])
        if 'ktwos' in kind: cols.append(corr._trailing_zeros(np.ravel(np.broadcast_arrays(k, m)[0]))[:,None].astype(float))
        if 'minside' in kind: cols.append(np.log2(np.minimum(np.minimum(m_,n_),k_))[:,None])
        return np.concatenate(cols, axis=1)
    return f
KINDS=[k for k in sys.argv[1:] if k!='cv']
for kind in ([] if 'cv' in sys.argv else KINDS):
    f = orig if kind=='base' else extra(kind)
    corr.tree_features=f; fit.tree_features=f
    t=time.time()
    params=fit.fit_trees(calibration, bare, gpu=gpu, trees=100, rate=0.2)
    model=CostModel(shipped.gpu, params)
    print(f"== {kind} (fit {time.time()-t:.0f} s)", flush=True)
    for label, s in (('calibration', calibration), *sets.items()):
        print(f"  {label:16s} {len(s):6d} {errors(s, model)}", flush=True)

def cv(kind, folds=5):
    f = orig if kind=='base' else extra(kind)
    corr.tree_features=f; fit.tree_features=f
    rng=np.random.default_rng(0); fold=rng.integers(0, folds, len(calibration))
    err=np.zeros(len(calibration))
    for i in range(folds):
        params=fit.fit_trees(calibration.subset(fold!=i), bare, gpu=gpu, trees=100, rate=0.2)
        s=calibration.subset(fold==i)
        from shapewise.cost import predict_gemm
        p=np.asarray(predict_gemm(s.m,s.n,s.k,batch=s.batch,layout=s.layout,gpu=CostModel(shipped.gpu, params)).time_ms)
        err[fold==i]=np.abs(p/s.time_ms-1)
    low=np.minimum(np.minimum(calibration.m,calibration.n),calibration.k); b=calibration.batch
    out=[]
    for lab,sel in (('gemm',b==1),('bmm',b>1),('gemm side<=16',(b==1)&(low<=16)),('bmm side<=16',(b>1)&(low<=16))):
        out.append(f"{lab} {np.median(err[sel]):.2%}/{np.percentile(err[sel],90):.2%}")
    print(f"CV {kind:22s} "+'  '.join(out), flush=True)

if 'cv' in sys.argv:
    for kind in KINDS or ('base','bytes','ktwos','minside','bytes+ktwos','bytes+minside','bytes+ktwos+minside'):
        cv(kind)
