"""What both scans of a ranked list share, without Numba: the fact guard's inputs of its rows
(:func:`fact_arrays`) and the lists of displaced ids built from an output plan
(:func:`planned_lists`).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from ..facts.guard import fact_modes, signatures_of
from ..facts.tables import FACT_COLUMN

# CSR fact signatures (offsets, values) and per-row guard modes (facts.fact_modes).
FactArrays = tuple[np.ndarray, np.ndarray, np.ndarray]


def fact_arrays(frame: pl.DataFrame) -> FactArrays | None:
    """The fact guard's inputs for the rows of ``frame``: its ``fact_signature`` column, or
    signatures computed from ``text``; None when it has neither."""
    if FACT_COLUMN not in frame.columns and "text" not in frame.columns:
        return None
    f_off, f_val = signatures_of(frame)
    types = frame.get_column("segment_type") if "segment_type" in frame.columns else None
    return f_off, f_val, fact_modes(types, frame.height)


def planned_lists(ids: pa.Array | None, order: np.ndarray, offsets: np.ndarray, nkept: int
                  ) -> tuple[np.ndarray, pa.Array]:
    """Kept row indices and the lists of displaced ids, from an output plan (see
    :func:`output_plan`)."""
    if nkept == order.size:
        values = pa.array([], type=ids.type if ids is not None else pa.string())
    else:
        assert ids is not None
        values = ids.take(pa.array(order[nkept:]))
    return order[:nkept].astype(np.int64), pa.LargeListArray.from_arrays(pa.array(offsets), values)
