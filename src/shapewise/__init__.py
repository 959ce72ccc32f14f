"""shapewise: is this transformer's shape fast on this GPU, and which shape of about the same size is faster?

The analytic core (shapes, ops, cost model, rules) needs neither torch nor a GPU; only
shapewise.measure imports torch, and only inside its functions.
"""

# search and verify name both a function and its module: the package root gives the function
# (`from shapewise.search import …` reaches the module's other names).
from .cost import CostParams, Losses, predict_gemm, predict_step
from .errors import ShapewiseError, ShapewiseWarning
from .hardware import GPU, GPUS, get_gpu
from .hf import load_config
from .hub import resolve_model
from .ops import Op, model_ops
from .presets import get_model
from .profile import CostModel, cost_model
from .report import check
from .search import search, suggest
from .shapes import ModelShape, Workload
from .verify import verify

__version__ = "0.1.0"
__all__ = ["CostModel", "CostParams", "GPU", "GPUS", "Losses", "ModelShape", "Op", "ShapewiseError", "ShapewiseWarning",
           "Workload", "check", "cost_model", "get_gpu", "get_model", "load_config", "model_ops", "predict_gemm",
           "predict_step", "resolve_model", "search", "suggest", "verify"]
