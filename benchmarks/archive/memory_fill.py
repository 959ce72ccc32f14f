"""Memory-bound ops fitted (fit.fit_bandwidth) over the calibration with and without a stream's fill:
the calibration's squared relative error and the seen models sets' memory-bound ops, by size (RESULTS,
"a memory-bound stream's fill": 1.53 against 1.83).

PYTHONPATH=src:benchmarks python benchmarks/archive/memory_fill.py   (from the repository root, on the CPU)
"""
import sys, dataclasses
sys.path.insert(0,'benchmarks')
import numpy as np
from refit_profile import averaged, rows_from_export
from few_blocks import measured_ops, signed
from shapewise.profile import find, cost_model
from shapewise.ops import MEMORY
from shapewise.fit import fit_bandwidth
from shapewise.cases import op_from_case
from shapewise.cost import predict_ops
shipped=find('h200'); base=cost_model('h200')
rows=averaged([rows_from_export(p) for p in shipped.fit['refitted_from']])
cal=[dict(family=c.params["family"], **{"pass": c.params["pass_"]}, bytes=c.bytes, time_ms=r["median_ms"], width=c.params["n"], rows=c.params["m"], table=c.params.get("k", 0)) for c, r in rows if c.bench == "op" and c.params["kind"] == MEMORY and r.get("error") is None]
calops=[(op_from_case(c.params, flops=0, nbytes=c.bytes), r['median_ms']) for c, r in rows if c.bench == "op" and c.params["kind"] == MEMORY and r.get("error") is None]
import shapewise.fit as fitmod
params=fit_bandwidth(cal, gpu=base.gpu, params=shipped.params)
keep=fitmod.memory_fill_share
fitmod.memory_fill_share=lambda nbytes, p: np.zeros_like(np.asarray(nbytes, float))  # no fill: its column all zeros
nofill=fit_bandwidth(cal, gpu=base.gpu, params=dataclasses.replace(shipped.params, memory_op_fill_ms=()))
fitmod.memory_fill_share=keep
print('fill mb', params.memory_op_fill_mb, 'fills', params.memory_op_fill_ms)
new=dataclasses.replace(base, params=params)
old=dataclasses.replace(base, params=nofill)
seen=measured_ops('memory')
for label,m in (('no fill',old),('with fill',new)):
    e=np.array([c.time_ms for c in predict_ops([o for o,_ in calops],gpu=m,dtype='bf16')])/np.array([t for _,t in calops])-1
    s=signed(seen,m); nb=np.array([float(r['bytes']) for _,r in seen])
    print(label, f"calibration {np.median(abs(e)):.1%}/{np.percentile(abs(e),90):.1%} SSE {np.sum(e**2):.3f}; seen {np.median(abs(s)):.1%}/{np.percentile(abs(s),90):.1%}; seen <100KB signed {np.median(s[nb<1e5]):+.1%} |{np.median(abs(s[nb<1e5])):.1%}|; 0.1-2MB signed {np.median(s[(nb>=1e5)&(nb<2e6)]):+.1%}")
