"""p-values calibrated to the search: a split placed where the test statistic is largest is only as sure as
the largest statistic of all the splits the search could have made would be by chance.

    p_calibrated = min(1, p x factor)

SEARCH_FACTORS gives the factor for a stretch of L runs searched for one split (every split that leaves
two runs or more a side): the share of series of pure noise whose smallest p over those splits is at
most x, divided by x, at x = CALIBRATED_AT. END_FACTOR is the newest-runs test's (the newest 2 to 6
runs against the runs before them). Both were measured on simulated series of normal noise by
`python benchmarks/history_calibration.py` (which prints this table) with the detector's own test; the
share of small p-values falls a little slower than x, so below CALIBRATED_AT the factor errs on the
safe side. docs/history.md gives the figures and the check that calibrated p-values are uniform.
"""

from __future__ import annotations

import numpy as np

CALIBRATED_AT = 1e-3
SEARCH_FACTORS = {6: 1.0, 10: 3.4, 15: 6.6, 20: 9.8, 30: 12.5, 45: 17.9, 60: 20.3}
END_FACTOR = 3.3


def search_factor(length) -> np.ndarray:
    """The factor for stretches of these lengths (interpolated in log length; the ends held)."""
    known = np.array(sorted(SEARCH_FACTORS), dtype=float)
    values = np.array([SEARCH_FACTORS[int(k)] for k in known])
    return np.interp(np.log(np.maximum(np.asarray(length, dtype=float), 1.0)), np.log(known), values)
