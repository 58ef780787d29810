"""A mergeable quantile sketch for columns of floats, with a stated error bound.

Each of `width` columns is summarised independently. While a column holds at most `exact_limit`
values they are kept as they are, and quantiles are numpy's own (`np.quantile`, linear method).
Past that, the sketch is a histogram per column on an absolute grid of power-of-two bins: bin `j`
at exponent `k` covers `[j * 2**k, (j + 1) * 2**k)`. Grids of different exponents nest, so a
histogram coarsens exactly (bin `j` goes to `j >> s`) and two sketches merge exactly. The
exponent is (nearly) the smallest whose grid covers the column's `[min, max]` with at most `bins`
bins, and it only depends on that range. So merging partial sketches yields the very same
histogram as sketching the union at once, whatever the order.

Error bound, per column, once in histogram mode: the estimate of any order statistic stays in the
bin of the true one, and numpy interpolates linearly between two of them, so

    |estimate - np.quantile(values, q)| <= w,   w = 2**k <= max(2 * (max - min) / (bins - 1),
                                                                2**-49 * max(|min|, |max|))

(the second term only matters for a nearly constant column; it keeps `x / w` an exact integer in
float64). `error_bound()` returns `w` per column, 0 while the column is exact.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlctl.domain.errors import InvalidInput

DEFAULT_BINS = 4096
DEFAULT_EXACT_LIMIT = 10_000
# |x| / 2**k stays below 2**_MANTISSA_HEADROOM, so bin numbers are exact integers in float64.
_MANTISSA_HEADROOM = 50
# Bounds on any exponent a finite double can need: below the smallest subnormal (an all-zero
# column), above a range wider than the largest double.
_SMALLEST_EXPONENT = -1100
_LARGEST_EXPONENT = 1030


def _bin_exponents(lo: np.ndarray, hi: np.ndarray, bins: int) -> np.ndarray:
    """Per column, an exponent whose grid covers `[lo, hi]` with at most `bins` bins.

    Near the smallest such, never finer than the float64 headroom allows, and monotone in the
    range (a wider range never gets a smaller exponent): that makes merge order irrelevant.
    """
    magnitude = np.maximum(np.abs(lo), np.abs(hi))
    _, magnitude_exponent = np.frexp(magnitude)
    floor = np.where(magnitude > 0, magnitude_exponent - _MANTISSA_HEADROOM, _SMALLEST_EXPONENT)
    span = hi - lo
    with np.errstate(divide="ignore"):
        fitted = np.ceil(np.log2(span / (bins - 1)))
    fitted = np.clip(np.nan_to_num(fitted, neginf=_SMALLEST_EXPONENT), None, _LARGEST_EXPONENT)
    exponents: np.ndarray = np.maximum(floor, fitted.astype(np.int64)).astype(np.int64)
    while True:
        needed = _bin_numbers(hi, exponents) - _bin_numbers(lo, exponents) + 1
        too_fine = needed > bins
        if not too_fine.any():
            return exponents
        exponents = exponents + too_fine


def _bin_numbers(values: np.ndarray, exponents: np.ndarray) -> np.ndarray:
    """`floor(values / 2**exponents)`, exactly; `exponents` broadcasts against `values`."""
    # int32 exponents take numpy's fast ldexp loop.
    scaled = np.ldexp(values, (-exponents).astype(np.int32))
    numbers: np.ndarray = scaled.astype(np.int64)  # rounds toward zero ...
    numbers -= scaled < numbers  # ... so step negative non-integers down (np.floor is slower)
    # Scaling by a power of two is exact unless it underflows, which needs bins wider than 1:
    # a tiny negative value then becomes -0.0 and lands in bin 0 instead of -1.
    if (exponents >= 1).any():
        numbers[(scaled == 0) & (values < 0)] = -1
    return numbers


class QuantileSketch:
    """Quantiles of `width` columns, fed with `(m, width)` float arrays; see the module doc."""

    def __init__(
        self, width: int, *, bins: int = DEFAULT_BINS, exact_limit: int = DEFAULT_EXACT_LIMIT
    ) -> None:
        if bins < 2 or exact_limit < 0 or width < 0:
            raise InvalidInput(
                f"a quantile sketch needs bins >= 2 and exact_limit >= 0, "
                f"got bins={bins}, exact_limit={exact_limit}",
                where="statistics",
            )
        self.width = width
        self.bins = bins
        self.exact_limit = exact_limit
        self.count = 0
        self._exact: list[np.ndarray] = []
        # Histogram mode (after more than `exact_limit` values): per column, the observed range,
        # the bin exponent, the absolute number of the first bin, and the counts.
        self._histogram: np.ndarray | None = None
        self._lo = np.full(width, np.inf)
        self._hi = np.full(width, -np.inf)
        self._exponents = np.full(width, _SMALLEST_EXPONENT, dtype=np.int64)
        self._first_bins = np.zeros(width, dtype=np.int64)

    @property
    def is_exact(self) -> bool:
        return self._histogram is None

    def add(self, columns: np.ndarray) -> None:
        """Add finite float values laid out by column: shape `(width, m)`, m values per column.

        The sketch may keep `columns` as it is (while exact): do not write to it afterwards.
        """
        if columns.ndim != 2 or columns.shape[0] != self.width:
            raise InvalidInput(
                f"expected values of shape ({self.width}, m), got {columns.shape}",
                where="statistics",
            )
        if columns.shape[1] == 0:
            return
        self.count += columns.shape[1]
        if self.is_exact and self.count <= self.exact_limit:
            self._exact.append(columns)
            return
        if self.is_exact:
            self._start_histogram()
        self._add_to_histogram(columns)

    def add_counted(self, values: np.ndarray, counts: np.ndarray) -> None:
        """Add `counts[c, i]` copies of `values[c, i]` to column `c`, both `(width, k)`.

        The same multiset as `add` would get, summarised without expanding it: a cheap path for
        data with few distinct values (uint8 pixels). Every column must get the same total.
        """
        totals = counts.sum(axis=1)
        if values.shape != counts.shape or values.shape[0] != self.width or np.ptp(totals) != 0:
            raise InvalidInput(
                f"expected values and counts of shape ({self.width}, k) with equal column totals",
                where="statistics",
            )
        total = int(totals[0]) if self.width else 0
        if total == 0:
            return
        self.count += total
        if self.is_exact and self.count <= self.exact_limit:
            self._exact.append(np.stack([np.repeat(v, c) for v, c in zip(values, counts)]))
            return
        if self.is_exact:
            self._start_histogram()
        present = counts > 0
        self._add_to_grid(
            values[present],
            np.repeat(np.arange(self.width), present.sum(axis=1)),
            np.where(present, values, np.inf).min(axis=1),
            np.where(present, values, -np.inf).max(axis=1),
            weights=counts[present],
        )

    def merge(self, other: QuantileSketch) -> QuantileSketch:
        """A new sketch of both inputs' values; neither input changes."""
        if (other.width, other.bins, other.exact_limit) != (
            self.width,
            self.bins,
            self.exact_limit,
        ):
            raise InvalidInput(
                "cannot merge quantile sketches of different width, bins or exact_limit",
                where="statistics",
            )
        merged = self.copy()
        if other.is_exact:
            for columns in other._exact:
                merged.add(columns)
            return merged
        if merged.is_exact:
            # Pour ours into a copy of theirs, so the histogram is built once.
            return other.merge(self)
        merged.count += other.count
        merged._regrid(np.minimum(merged._lo, other._lo), np.maximum(merged._hi, other._hi))
        assert merged._histogram is not None and other._histogram is not None
        for column in range(self.width):
            merged._histogram[column] += _rebin(
                other._histogram[column],
                int(other._first_bins[column]),
                int(other._exponents[column]),
                int(merged._first_bins[column]),
                int(merged._exponents[column]),
                self.bins,
            )
        return merged

    def copy(self) -> QuantileSketch:
        twin = QuantileSketch(self.width, bins=self.bins, exact_limit=self.exact_limit)
        twin.count = self.count
        twin._exact = list(self._exact)  # chunks are never written to, sharing them is safe
        twin._histogram = None if self._histogram is None else self._histogram.copy()
        twin._lo, twin._hi = self._lo.copy(), self._hi.copy()
        twin._exponents, twin._first_bins = self._exponents.copy(), self._first_bins.copy()
        return twin

    def quantiles(self, qs: Sequence[float]) -> np.ndarray:
        """Shape `(len(qs), width)`: numpy's linear quantiles, estimated within `error_bound()`."""
        if self.count == 0:
            raise InvalidInput("no values to take quantiles of", where="statistics")
        levels = np.asarray(qs, dtype=np.float64)
        if self.is_exact:
            columns = np.concatenate(self._exact, axis=1)
            exact: np.ndarray = np.quantile(columns, levels, axis=1).reshape(-1, self.width)
            return exact
        positions = levels * (self.count - 1)
        below = np.floor(positions).astype(np.int64)
        above = np.minimum(below + 1, self.count - 1)
        fraction = (positions - below)[:, None]
        at_below = self._order_statistics(below)
        at_above = self._order_statistics(above)
        estimate: np.ndarray = at_below + fraction * (at_above - at_below)
        return estimate

    def error_bound(self) -> np.ndarray:
        """Per column, the most any quantile from `quantiles` can differ from numpy's."""
        if self.is_exact:
            return np.zeros(self.width)
        return np.ldexp(1.0, self._exponents)

    def _start_histogram(self) -> None:
        kept, self._exact = self._exact, []
        self._histogram = np.zeros((self.width, self.bins), dtype=np.int64)
        if kept:
            self._add_to_histogram(np.concatenate(kept, axis=1))

    def _add_to_histogram(self, columns: np.ndarray) -> None:
        column_of = np.arange(self.width)[:, None]  # broadcasts along each column's values
        self._add_to_grid(columns, column_of, columns.min(axis=1), columns.max(axis=1))

    def _add_to_grid(
        self,
        values: np.ndarray,
        column_of: np.ndarray,
        low: np.ndarray,
        high: np.ndarray,
        weights: np.ndarray | None = None,
    ) -> None:
        """Count `values` into the histogram; `column_of` (broadcast) names their columns."""
        self._regrid(np.minimum(self._lo, low), np.maximum(self._hi, high))
        assert self._histogram is not None
        # One bincount for all columns: column c owns the slots [c * bins, (c + 1) * bins).
        slots = _bin_numbers(values, self._exponents[column_of])
        slots += column_of * self.bins - self._first_bins[column_of]
        counts = np.bincount(slots.reshape(-1), weights=weights, minlength=self.width * self.bins)
        self._histogram += counts.reshape(self.width, self.bins).astype(np.int64)

    def _regrid(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """Widen the grid of every column so it covers `[lo, hi]`."""
        assert self._histogram is not None
        if (lo == self._lo).all() and (hi == self._hi).all():
            return  # the usual case once a stream has seen its range
        exponents = np.maximum(self._exponents, _bin_exponents(lo, hi, self.bins))
        first_bins = _bin_numbers(lo, exponents)
        for column in np.flatnonzero(
            (exponents != self._exponents) | (first_bins != self._first_bins)
        ):
            self._histogram[column] = _rebin(
                self._histogram[column],
                int(self._first_bins[column]),
                int(self._exponents[column]),
                int(first_bins[column]),
                int(exponents[column]),
                self.bins,
            )
        self._lo, self._hi = lo, hi
        self._exponents, self._first_bins = exponents, first_bins

    def _order_statistics(self, ranks: np.ndarray) -> np.ndarray:
        """Estimates of the values of 0-based `ranks`, per column: shape `(len(ranks), width)`."""
        assert self._histogram is not None
        out = np.empty((ranks.size, self.width))
        for column in range(self.width):
            counts = self._histogram[column]
            cumulative = np.cumsum(counts)
            bins = np.searchsorted(cumulative, ranks, side="right")
            in_bin = counts[bins]
            before = cumulative[bins] - in_bin
            # Spread a bin's values evenly inside it; the true value lies in the same bin.
            offset = (ranks - before + 0.5) / in_bin
            estimate = np.ldexp(self._first_bins[column] + bins + offset, self._exponents[column])
            out[:, column] = np.clip(estimate, self._lo[column], self._hi[column])
        # The extremes are known exactly.
        out[ranks == 0] = self._lo
        out[ranks == self.count - 1] = self._hi
        return out


def _rebin(
    counts: np.ndarray, first: int, exponent: int, new_first: int, new_exponent: int, bins: int
) -> np.ndarray:
    """Counts of one column moved to a coarser (or equal) grid that starts at `new_first`."""
    occupied = np.flatnonzero(counts)
    if occupied.size == 0:
        return np.zeros(bins, dtype=np.int64)
    # Floor division by a power of two: exact, and it rounds negative bin numbers down too.
    # Bin numbers stay below 2**(_MANTISSA_HEADROOM + 1), so a shift of 63 already gives the floor
    # (0 or -1) of any longer one; numpy's shift is undefined past 63.
    shift = min(new_exponent - exponent, 63)
    targets = ((first + occupied) >> shift) - new_first
    return np.bincount(targets, weights=counts[occupied], minlength=bins).astype(np.int64)
