"""Arrow arrays from numpy arrays without importing pandas.

``pyarrow.array`` asks pandas whether its argument is a pandas object, and so imports pandas
(0.2 CPU s and 35 MiB) the first time it runs, even for a numpy array. `arrow_array` builds the
common cases from their buffers with ``pyarrow.Array.from_buffers``, which never asks: 1-d
numeric and boolean arrays, and object arrays of ``str`` (or None). Anything else goes to
``pyarrow.array``. The result equals ``pyarrow.array(values)``: same type, same values.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["arrow_array"]

_NUMERIC = {np.dtype(t): f for t, f in (
    (np.int8, pa.int8), (np.int16, pa.int16), (np.int32, pa.int32), (np.int64, pa.int64),
    (np.uint8, pa.uint8), (np.uint16, pa.uint16), (np.uint32, pa.uint32), (np.uint64, pa.uint64),
    (np.float32, pa.float32), (np.float64, pa.float64),
)}


def _strings(values: np.ndarray) -> pa.Array | None:
    encoded = []
    valid = np.ones(len(values), dtype=bool)
    for i, v in enumerate(values.tolist()):
        if v is None:
            valid[i] = False
            encoded.append(b"")
        elif isinstance(v, str):
            try:
                encoded.append(v.encode("utf-8"))
            except UnicodeEncodeError:
                return None  # pyarrow says what it makes of a lone surrogate
        else:
            return None
    if not valid.any():
        return None  # all None: pyarrow's null type
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    if offsets[-1] >= 2**31 - 1:
        return None  # a large_string's worth: pyarrow decides
    bitmap = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.string(), len(encoded), [bitmap, pa.py_buffer(offsets.astype(np.int32)),
                                                             pa.py_buffer(b"".join(encoded))])


def arrow_array(values: np.ndarray) -> pa.Array:
    """``pyarrow.array(values)`` for a numpy array, without importing pandas where it can."""
    values = np.asarray(values)
    out = None
    if values.ndim == 1 and values.dtype == np.bool_:
        out = pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(np.packbits(values, bitorder="little"))])
    elif values.ndim == 1 and values.dtype in _NUMERIC:
        out = pa.Array.from_buffers(_NUMERIC[values.dtype](), len(values),
                                    [None, pa.py_buffer(np.ascontiguousarray(values))])
    elif values.ndim == 1 and values.dtype == object and len(values):
        out = _strings(values)
    return out if out is not None else pa.array(values)
