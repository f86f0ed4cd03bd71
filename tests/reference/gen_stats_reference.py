#!/usr/bin/env python3
"""Reference values for rollgate's `stats` module, computed independently with scipy / mpmath.

Usage: python3 tests/reference/gen_stats_reference.py > tests/reference/stats_reference.json
Needs: pip install scipy numpy mpmath. Seeded: the output is the same on every run.

Sections (each a list of cases):

- fisher: one-sided Fisher exact p-values P(X >= x_c). Odds ratio 1: scipy.stats.fisher_exact
  (alternative="greater"). Other odds ratios: the noncentral hypergeometric tail summed over the
  whole support in 50-digit mpmath arithmetic; scipy.stats.nchypergeom_fisher.sf is recorded next
  to it as a cross-check (it is accurate to ~1e-8 only).
- ratio: the full tolerance test. The restricted maximum-likelihood stable rates are found with
  scipy.optimize.brentq on the derivative of the log-likelihood. The relative half is the
  unconditional test of p_c <= (1+r) p_s ordered by the Farrington-Manning score statistic:
  P(Z >= z_observed) summed over the whole support of both counts (every stable count, every
  canary count) with scipy.stats.binom, at the brentq null point (the E-test, recorded as
  relativeEstimatedP) and as the Berger-Boos supremum over a grid (see relative_test); the
  absolute half is the E-test
  of the margin summed over the whole stable support (pmf * sf); the p-value is the larger.
  Fisher's tail at the tolerance's odds ratio (1+r)(1-p)/(1-(1+r)p), which the relative half
  used before, is kept as `fisherRelativeP` (fisher_exact_one_sided stays public).
- mann_whitney: scipy.stats.mannwhitneyu with method="exact" (no ties) and "asymptotic"
  (use_continuity=True), all three alternatives.
- hodges_lehmann: all n*m pairwise differences sorted with numpy; estimate = numpy.median; the
  interval is [d_(k), d_(nm+1-k)] with k = the largest k >= 1 such that P(U <= k-1) <= alpha/2
  under the exact null distribution of U (no ties, both sizes < 50; the distribution is the
  q-binomial coefficient, computed here in exact integer arithmetic), otherwise
  k = floor(nm/2 + 1/2 - z * sigma) clamped to [1, ceil(nm/2)], z = norm.isf(alpha/2), sigma the
  tie-corrected standard deviation of U.
"""

import json
import math
import sys

import mpmath
import numpy as np
from scipy import optimize, stats

rng = np.random.default_rng(20240601)
mpmath.mp.dps = 50


# ---------------------------------------------------------------- Fisher / noncentral tail
def fnch_upper_mp(xc, nc, xs, ns, psi):
    b = xc + xs
    lo, hi = max(0, b - ns), min(b, nc)
    psi = mpmath.mpf(psi)
    total = mpmath.mpf(0)
    upper = mpmath.mpf(0)
    for x in range(lo, hi + 1):
        w = mpmath.binomial(nc, x) * mpmath.binomial(ns, b - x) * psi**x
        total += w
        if x >= xc:
            upper += w
    return float(upper / total)


def fisher_cases():
    cases = []
    for i in range(70):
        nc = int(rng.choice([5, 12, 40, 200, 1000, 3000]))
        ns = int(rng.choice([5, 12, 40, 200, 1000, 3000]))
        rate = float(rng.choice([0.01, 0.05, 0.2, 0.5]))
        xs = int(rng.binomial(ns, rate))
        xc = int(rng.binomial(nc, min(1.0, rate * float(rng.choice([1.0, 1.5, 3.0])))))
        psi = 1.0 if i % 2 == 0 else float(np.round(rng.uniform(0.5, 3.0), 6))
        exact = fnch_upper_mp(xc, nc, xs, ns, psi)
        if psi == 1.0:
            scipy_p = float(
                stats.fisher_exact([[xc, nc - xc], [xs, ns - xs]], alternative="greater").pvalue
            )
            # scipy and the 50-digit sum must agree before either is trusted.
            assert abs(scipy_p - exact) <= 1e-9 * max(exact, 1e-300) + 1e-300, (scipy_p, exact)
        else:
            scipy_p = (
                float(stats.nchypergeom_fisher.sf(xc - 1, nc + ns, nc, xc + xs, psi))
                if xc > 0
                else 1.0
            )
            assert abs(scipy_p - exact) <= 1e-6 * exact + 1e-12, (scipy_p, exact)
        cases.append(
            dict(canaryBad=xc, canaryTotal=nc, stableBad=xs, stableTotal=ns, oddsRatio=psi,
                 p=exact, scipyP=scipy_p)
        )
    return cases


# ---------------------------------------------------------------- ratio (tolerance) test
def allowed(p, r, m):
    return min(1.0, max((1.0 + r) * p, p + m))


def restricted_mle(xc, nc, xs, ns, a, b, lo, hi):
    """argmax over p in [lo, hi] of the log-likelihood with p_c = a p + b (concave)."""
    fc, fs = nc - xc, ns - xs

    def deriv(p):
        t = a * p + b
        d = 0.0
        if xc > 0:
            d += xc * a / t
        if fc > 0:
            d -= fc * a / (1.0 - t)
        if xs > 0:
            d += xs / p
        if fs > 0:
            d -= fs / (1.0 - p)
        return d

    eps = (hi - lo) * 1e-15
    if deriv(lo + eps) <= 0:
        return lo
    if deriv(hi - eps) >= 0:
        return hi
    return optimize.brentq(deriv, lo + eps, hi - eps, xtol=1e-300, rtol=8.9e-16, maxiter=1000)


def score_z(xc, nc, xs, ns, theta):
    """Farrington-Manning score statistic for p_c = theta p_s (vectorised over the counts)."""
    xc = np.asarray(xc, dtype=np.float64)
    xs = np.asarray(xs, dtype=np.float64)
    a = theta * (nc + ns)
    b = theta * nc + xc + ns + theta * xs
    c = xc + xs
    disc = np.maximum(b * b - 4.0 * a * c, 0.0)
    ps = np.minimum(np.where(c > 0, 2.0 * c / (b + np.sqrt(disc)), 0.0), 1.0 / theta)
    pc = np.minimum(theta * ps, 1.0)
    num = xc / nc - theta * xs / ns
    var = pc * (1.0 - pc) / nc + theta * theta * ps * (1.0 - ps) / ns
    safe = np.where(var > 0, var, 1.0)
    signed = np.where(num > 0, np.inf, np.where(num < 0, -np.inf, 0.0))
    return np.where(var > 0, num / np.sqrt(safe), signed)


GAMMA = 1e-7
GRID_STEPS = 16


def relative_test(xc, nc, xs, ns, r):
    """The relative half: Berger-Boos p-value of the score-ordered unconditional test.

    For every stable count the extreme canary counts are found on the whole support (Z >= z_obs,
    ties within 1e-10 relative); P(extreme) at a null point is then sum_x binom.pmf(x) *
    binom.sf(threshold - 1) over every stable count. The E-test is that at the restricted MLE
    (brentq); the p-value is the largest over 17 points equally spaced in asin(sqrt(p)) across
    Wilson's interval for stable's rate at z = norm.isf(GAMMA / 2) and the estimate when it lies
    in that interval, plus GAMMA (Berger & Boos 1994).
    """
    theta = 1.0 + r
    cap = 1.0 / theta
    ps_hat = restricted_mle(xc, nc, xs, ns, theta, 0.0, 0.0, cap)
    z_obs = float(score_z(xc, nc, xs, ns, theta))
    cut = z_obs - 1e-10 * max(1.0, abs(z_obs))
    canary = np.arange(nc + 1)
    stable = np.arange(ns + 1)
    thresholds = np.empty(ns + 1)
    for x in stable:
        extreme = np.nonzero(score_z(canary, nc, x, ns, theta) >= cut)[0]
        thresholds[x] = extreme[0] if len(extreme) else nc + 1

    def tail(ps):
        pc = min(1.0, theta * ps)
        return float(np.sum(stats.binom.pmf(stable, ns, ps) * stats.binom.sf(thresholds - 1, nc, pc)))

    z = stats.norm.isf(GAMMA / 2)
    p = xs / ns
    centre = (p + z * z / (2 * ns)) / (1 + z * z / ns)
    half = z / (1 + z * z / ns) * math.sqrt(p * (1 - p) / ns + z * z / (4 * ns * ns))
    lo, hi = max(0.0, centre - half), min(1.0, centre + half)
    a, b = math.asin(math.sqrt(min(lo, cap))), math.asin(math.sqrt(min(hi, cap)))
    grid = [min(cap, math.sin(a + (b - a) * j / GRID_STEPS) ** 2) for j in range(GRID_STEPS + 1)]
    estimated = min(1.0, max(0.0, tail(ps_hat)))
    supremum = max(tail(q) for q in grid)
    if lo <= ps_hat <= hi:
        supremum = max(supremum, estimated)
    return min(1.0, supremum + GAMMA), estimated, ps_hat, z_obs


def ratio_reference(xc, nc, xs, ns, r, m):
    out = dict(relativeP=None, relativeEstimatedP=None, relativeNullStableRate=None,
               relativeScore=None, oddsRatioBound=None, fisherRelativeP=None, absoluteP=None,
               nullStableRate=None)
    p = 0.0
    if r > 0 or m == 0:
        rel, estimated, ps, z = relative_test(xc, nc, xs, ns, r)
        out["relativeP"], out["relativeEstimatedP"] = rel, estimated
        out["relativeNullStableRate"], out["relativeScore"] = ps, z
        p = max(p, rel)
        # The conditional test the relative half used before (fisher_exact_one_sided, still
        # public API) at the tolerance's odds ratio.
        pc = (1.0 + r) * ps
        psi = 1.0 if r == 0 else (math.inf if pc >= 1.0 else (1.0 + r) * (1.0 - ps) / (1.0 - pc))
        out["oddsRatioBound"] = psi
        out["fisherRelativeP"] = 1.0 if math.isinf(psi) else fnch_upper_mp(xc, nc, xs, ns, psi)
    if m > 0:
        ps = restricted_mle(xc, nc, xs, ns, 1.0, m, 0.0, 1.0 - m)
        pc = min(1.0, ps + m)
        observed = xc / nc - allowed(xs / ns, 0.0, m)
        x = np.arange(ns + 1, dtype=np.float64)
        thresholds = np.ceil(nc * (observed + np.minimum(1.0, np.maximum(x / ns, x / ns + m))) - 1e-6)
        tails = np.where(thresholds <= 0, 1.0, stats.binom.sf(thresholds - 1, nc, pc))
        absolute = float(np.sum(stats.binom.pmf(x, ns, ps) * tails))
        absolute = min(1.0, max(0.0, absolute))
        out["absoluteP"], out["nullStableRate"] = absolute, ps
        p = max(p, absolute)
    out["p"] = p
    return out


def ratio_cases():
    cases = []
    tolerances = [(0.0, 0.0), (0.2, 0.0), (0.2, 0.001), (0.0, 0.01), (0.5, 0.005), (1.0, 0.0)]
    for i in range(80):
        r, m = tolerances[i % len(tolerances)]
        nc = int(rng.choice([3, 20, 100, 500, 2000, 5000]))
        ns = int(rng.choice([3, 20, 100, 500, 2000, 5000]))
        rate = float(rng.choice([0.0005, 0.002, 0.01, 0.05, 0.2]))
        xs = int(rng.binomial(ns, rate))
        xc = int(rng.binomial(nc, min(1.0, rate * float(rng.choice([1.0, 1.3, 2.0, 4.0])))))
        if xc + xs > 6000:
            continue
        ref = ratio_reference(xc, nc, xs, ns, r, m)
        case = dict(canaryBad=xc, canaryTotal=nc, stableBad=xs, stableTotal=ns, maxIncrease=r,
                    margin=m)
        case.update(ref)
        if case["relativeScore"] is not None and math.isinf(case["relativeScore"]):
            case["relativeScore"] = "inf" if case["relativeScore"] > 0 else "-inf"
        if case["oddsRatioBound"] is not None and math.isinf(case["oddsRatioBound"]):
            case["oddsRatioBound"] = "inf"
        cases.append(case)
    return cases


# ---------------------------------------------------------------- Mann-Whitney U
def rounded(values, digits):
    return [float(v) for v in np.round(values, digits)]


def draw_pair(n1, n2, ties):
    shift = float(rng.choice([0.0, 0.3, 1.0]))
    digits = 0 if ties else 3
    scale = 3.0 if ties else 10.0
    x = rounded(rng.normal(shift, 1.0, n1) * scale, digits)
    y = rounded(rng.normal(0.0, 1.0, n2) * scale, digits)
    return x, y


def has_ties(x, y):
    pooled = x + y
    return len(set(pooled)) < len(pooled)


def mann_whitney_cases():
    cases = []
    while len(cases) < 150:
        n1, n2 = int(rng.integers(1, 25)), int(rng.integers(1, 25))
        x, y = draw_pair(n1, n2, False)
        if has_ties(x, y):
            continue
        for alt in ["two-sided", "greater", "less"]:
            res = stats.mannwhitneyu(x, y, alternative=alt, method="exact")
            cases.append(dict(x=x, y=y, alternative=alt, method="exact", u=float(res.statistic),
                              p=float(res.pvalue)))
    asym = []
    while len(asym) < 150:
        n1, n2 = int(rng.integers(2, 60)), int(rng.integers(2, 60))
        ties = len(asym) % 2 == 0
        x, y = draw_pair(n1, n2, ties)
        for alt in ["two-sided", "greater", "less"]:
            res = stats.mannwhitneyu(x, y, alternative=alt, method="asymptotic",
                                     use_continuity=True)
            asym.append(dict(x=x, y=y, alternative=alt, method="asymptotic",
                             u=float(res.statistic), p=float(res.pvalue)))
    return cases + asym


# ---------------------------------------------------------------- Hodges-Lehmann
def exact_u_counts(n1, n2):
    """Counts of U = 0..n1*n2: coefficients of the q-binomial [n1+n2 choose n1]_q (exact ints)."""
    m, n = min(n1, n2), max(n1, n2)
    poly = [1]
    for i in range(1, m + 1):
        # multiply by (1 - q^(n+i))
        grown = poly + [0] * (n + i)
        for k in range(len(grown) - 1, n + i - 1, -1):
            grown[k] -= grown[k - (n + i)]
        # divide by (1 - q^i): c[k] = a[k] + c[k-i]
        for k in range(i, len(grown)):
            grown[k] += grown[k - i]
        while len(grown) > 1 and grown[-1] == 0:
            grown.pop()
        poly = grown
    poly += [0] * (m * n + 1 - len(poly))
    return poly


def hl_reference(x, y, confidence):
    x, y = np.array(x), np.array(y)
    n1, n2 = len(x), len(y)
    d = np.sort((x[:, None] - y[None, :]).ravel())
    mn = n1 * n2
    half_alpha = (1.0 - confidence) / 2.0
    pooled = np.concatenate([x, y])
    _, counts = np.unique(pooled, return_counts=True)
    tie_term = float(np.sum(counts.astype(float) ** 3 - counts))
    max_k = max(1, (mn + 1) // 2)
    if tie_term == 0 and n1 < 50 and n2 < 50:
        counts_u = exact_u_counts(n1, n2)
        total = sum(counts_u)
        cum, k = 0, 0
        while k < max_k:
            cum_next = cum + counts_u[k]
            # P(U <= k) <= alpha/2, compared exactly with a tiny relative slack as in Rust
            if cum_next / total <= half_alpha * (1 + 1e-12):
                cum = cum_next
                k += 1
            else:
                break
        k = max(k, 1)
        achieved = 1.0 - 2.0 * (sum(counts_u[:k]) / total)
        method = "exact"
    else:
        n = n1 + n2
        sigma = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1))))
        if sigma == 0:
            k, achieved = max_k, 1.0
        else:
            z = stats.norm.isf(half_alpha)
            raw = math.floor(mn / 2.0 + 0.5 - z * sigma)
            k = 1 if raw < 1 else min(int(raw), max_k)
            achieved = 1.0 - 2.0 * stats.norm.cdf((k - 0.5 - mn / 2.0) / sigma)
        method = "asymptotic"
    return dict(estimate=float(np.median(d)), lower=float(d[k - 1]), upper=float(d[mn - k]),
                k=int(k), achievedConfidence=float(achieved), method=method)


def hodges_lehmann_cases():
    cases = []
    x, y = [10.0, 20.0, 30.0, 40.0], [1.0, 2.0, 3.0, 4.0]
    case = dict(x=x, y=y, confidence=0.95)
    case.update(hl_reference(x, y, 0.95))
    assert (case["lower"], case["upper"], case["estimate"]) == (6.0, 39.0, 22.5)
    cases.append(case)
    confidences = [0.8, 0.9, 0.95, 0.98, 0.99, 0.999]
    while len(cases) < 70:
        i = len(cases)
        big = i % 7 == 0
        n1 = int(rng.integers(60, 220)) if big else int(rng.integers(1, 45))
        n2 = int(rng.integers(60, 220)) if big else int(rng.integers(1, 45))
        ties = i % 3 == 0
        x, y = draw_pair(n1, n2, ties)
        conf = confidences[i % len(confidences)]
        case = dict(x=x, y=y, confidence=conf)
        case.update(hl_reference(x, y, conf))
        cases.append(case)
    return cases


def main():
    doc = dict(
        generator="tests/reference/gen_stats_reference.py",
        scipy=__import__("scipy").__version__,
        numpy=np.__version__,
        mpmath=mpmath.__version__,
        fisher=fisher_cases(),
        ratio=ratio_cases(),
        mannWhitney=mann_whitney_cases(),
        hodgesLehmann=hodges_lehmann_cases(),
    )
    json.dump(doc, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
