"""Gradient-boosted trees in numpy: how a calibrated profile corrects what the analytic GEMM model
leaves over (corrections.py), learnt from the calibration's own measurements.

The trees are oblivious, as CatBoost's are: each of a tree's DEPTH levels asks one question of every
sample (is feature f over threshold t?), and the answers, read as the bits of a number, name one of
its 2**DEPTH leaves. A forest predicts its base plus each tree's leaf. Asking each level one question
makes a prediction a few vectorized comparisons of bytes (under 1 µs a GEMM for 100 trees, in
batches), where trees that ask each node its own question walk node by node (30 µs).

Fitting is least squares, tree after tree on what the trees before left over (boosting, each tree's
leaves shrunk by RATE). A level's question is the one, among the quantile bins of every feature
(a histogram fit, as LightGBM and scikit-learn's HistGradientBoosting fit theirs), that lowers the
squared error of all its nodes most, each leaf's value shrunk towards 0 by L2 samples' weight: a leaf
of few samples says little. A level no question improves asks none (threshold NO_SPLIT: every
sample answers no). Deterministic: the same samples give the same forest.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

DEPTH = 8  # a leaf's index is then one byte
LEAVES = 2 ** DEPTH
ROW_WIDTH = 2 * DEPTH + LEAVES  # a profile's row per tree: features, thresholds, leaves
NO_SPLIT = float(np.finfo(float).max)  # no value is over it
CHUNK = 4096  # samples a prediction takes at once (it makes arrays of samples × trees × DEPTH)


@dataclass(frozen=True)
class Forest:
    base: float
    feature: np.ndarray  # (trees, DEPTH) int: the feature each level asks about
    threshold: np.ndarray  # (trees, DEPTH): over it, the level's bit is 1
    leaf: np.ndarray  # (trees, LEAVES): each leaf's value, shrunk by the rate

    @property
    def trees(self) -> int:
        return len(self.leaf)

    def rows(self) -> tuple[tuple[float, ...], ...]:
        """A row per tree (features, thresholds, leaves), as a profile stores the forest."""
        return tuple(tuple(float(x) for x in row) for row in np.hstack([self.feature, self.threshold, self.leaf]))

    @functools.cached_property
    def questions(self) -> tuple[list[np.ndarray], np.ndarray]:
        """Per feature, the thresholds the forest asks of it (sorted, at most 255); per question, its
        threshold's rank there: a value is over the threshold when more than that rank of them are
        under it."""
        features = int(self.feature.max()) + 1 if self.feature.size else 0
        asked = [np.unique(self.threshold[(self.feature == f) & (self.threshold < NO_SPLIT)]) for f in range(features)]
        if any(len(a) > 255 for a in asked):
            raise ValueError("a forest asks a feature more than 255 thresholds")
        ranks = np.full(self.feature.shape, 255, dtype=np.uint8)  # NO_SPLIT: no rank is over 255
        for f, thresholds in enumerate(asked):
            mine = (self.feature == f) & (self.threshold < NO_SPLIT)
            ranks[mine] = np.searchsorted(thresholds, self.threshold[mine])
        return asked, ranks

    @classmethod
    def from_rows(cls, base: float, rows) -> Forest:
        table = np.array(rows, dtype=float).reshape(-1, ROW_WIDTH)
        return cls(float(base), table[:, :DEPTH].astype(np.int64), table[:, DEPTH:2 * DEPTH], table[:, 2 * DEPTH:])


def fit_forest(x: np.ndarray, y: np.ndarray, *, trees: int = 100, rate: float = 0.2, bins: int = 64,
               l2: float = 1.0) -> Forest:
    """Least-squares boosting of `trees` oblivious trees on samples x (n × features) and targets y."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n, features = x.shape
    edges = [np.unique(np.quantile(x[:, f], np.linspace(0, 1, bins + 1)[1:-1])) for f in range(features)]
    # A sample's bin: how many of its feature's edges it is over (so over edge j means bin > j).
    binned = np.stack([np.searchsorted(edges[f], x[:, f], side="left") for f in range(features)], axis=1)
    base = float(y.mean())
    left_over = y - base
    feature, threshold = np.zeros((trees, DEPTH), dtype=np.int64), np.full((trees, DEPTH), NO_SPLIT)
    leaf = np.zeros((trees, LEAVES))
    for t in range(trees):
        node = np.zeros(n, dtype=np.int64)
        for level in range(DEPTH):
            nodes, best = 2 ** level, (0.0, 0, -1)
            for f in range(features):
                at = node * bins + binned[:, f]
                sums = np.bincount(at, left_over, nodes * bins).reshape(nodes, bins)
                counts = np.bincount(at, minlength=nodes * bins).reshape(nodes, bins)
                below_sum, below_count = np.cumsum(sums, axis=1), np.cumsum(counts, axis=1)
                total_sum, total_count = below_sum[:, -1:], below_count[:, -1:]
                gain = (below_sum ** 2 / (below_count + l2) + (total_sum - below_sum) ** 2 / (total_count - below_count + l2)
                        - total_sum ** 2 / (total_count + l2)).sum(axis=0)
                gain[len(edges[f]):] = 0.0  # past the last edge is no question
                j = int(np.argmax(gain))
                if gain[j] > best[0]:
                    best = (float(gain[j]), f, j)
            if best[2] >= 0:
                feature[t, level], threshold[t, level] = best[1], edges[best[1]][best[2]]
            node += (x[:, feature[t, level]] > threshold[t, level]) << level
        sums, counts = np.bincount(node, left_over, LEAVES), np.bincount(node, minlength=LEAVES)
        leaf[t] = rate * sums / (counts + l2)
        left_over = left_over - leaf[t, node]
    return Forest(base, feature, threshold, leaf)


def predict_forest(forest: Forest, x: np.ndarray) -> np.ndarray:
    """The forest's value of each sample of x (n × features)."""
    x = np.asarray(x, dtype=float)
    out = np.full(len(x), forest.base)
    asked, ranks = forest.questions
    columns, over_rank = forest.feature.T.ravel(), ranks.T.ravel()[:, None]  # level by level, each over every tree
    first_leaf = (np.arange(forest.trees) * LEAVES)[:, None]
    leaves = forest.leaf.ravel()
    for start in range(0, len(x), CHUNK):
        part = x[start:start + CHUNK]
        # Each sample's rank among the thresholds asked of each feature, a byte, feature by feature: a
        # question is then a comparison of bytes, cheaper to gather than the samples' values.
        rank = np.zeros((len(asked), len(part)), dtype=np.uint8)
        for f, thresholds in enumerate(asked):
            if len(thresholds):
                rank[f] = np.searchsorted(thresholds, part[:, f], side="left")
        over = (rank[columns] > over_rank).view(np.uint8).reshape(DEPTH, forest.trees, len(part))
        index = over[0].copy()
        for level in range(1, DEPTH):  # level l's answer is bit l (a byte: DEPTH is 8)
            index |= over[level] << np.uint8(level)
        # Summed per sample along its own row: the same order whatever the batch, so that one GEMM
        # priced alone and priced among others gets the same number to the last bit.
        out[start:start + CHUNK] += np.ascontiguousarray(leaves[index + first_leaf].T).sum(axis=1)
    return out
