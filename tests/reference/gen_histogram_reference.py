"""Reference values for the histogram form's rank test with no tolerance (maxIncrease 0).

Each case is a pair of bucket-count vectors over the same bounds. Every request is expanded to
its bucket index (an ordinal value; requests in one bucket are ties) and scipy computes:
- theta = U / (n m) with U from scipy.stats.mannwhitneyu(canary, stable) (mid-ranks for ties);
- the Brunner-Munzel statistic of scipy.stats.brunnermunzel(stable, canary,
  distribution="normal"), positive when the canary is slower.
Run: python3 tests/reference/gen_histogram_reference.py > tests/reference/histogram_reference.json
(seeded; scipy 1.17.1, numpy 2.4).
"""
import json

import numpy as np
import scipy
from scipy import stats

rng = np.random.default_rng(20261201)
cases = []
for i in range(60):
    buckets = int(rng.integers(3, 13))
    n_c, n_s = int(rng.integers(5, 3000)), int(rng.integers(5, 3000))
    shift = rng.uniform(-1.0, 1.5)
    p_s = rng.dirichlet(np.ones(buckets))
    # A slower canary: mass moved towards higher buckets.
    weights = p_s * np.exp(shift * np.arange(buckets) / buckets)
    p_c = weights / weights.sum()
    c = rng.multinomial(n_c, p_c)
    s = rng.multinomial(n_s, p_s)
    x = np.repeat(np.arange(buckets), c)
    y = np.repeat(np.arange(buckets), s)
    u = stats.mannwhitneyu(x, y, method="asymptotic").statistic
    bm = stats.brunnermunzel(y, x, distribution="normal").statistic
    cases.append(
        {
            "canary": c.tolist(),
            "stable": s.tolist(),
            "theta": float(u) / (n_c * n_s),
            "brunnerMunzel": float(bm) if np.isfinite(bm) else None,
        }
    )
print(json.dumps({"scipy": scipy.__version__, "cases": cases}, indent=1))
