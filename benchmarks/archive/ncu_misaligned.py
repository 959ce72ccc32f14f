"""Three GEMMs that differ only in alignment, for Nsight Compute: 4096³ (Hopper's own kernel),
4096×4096×4098 (an even k: Ampere kernels) and 4096×4096×4097 (an odd k: Turing kernels), nn layout,
bf16, each called once after its inputs are made.

Run on the GPU: ncu -k regex:"nvjet|cutlass|splitK|gemm" --section SpeedOfLight --section Occupancy \
    --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis python benchmarks/ncu_misaligned.py
"""

import torch

for k in (4096, 4098, 4097):
    a = torch.ones(4096, k, device="cuda", dtype=torch.bfloat16)
    b = torch.ones(k, 4096, device="cuda", dtype=torch.bfloat16)
    a @ b
    torch.cuda.synchronize()
