"""`pdbq.arrow_arrays.arrow_array` is ``pyarrow.array`` for numpy arrays (same type, same values),
built without importing pandas: drawn arrays of every dtype it builds itself, and of others it
hands on."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pdbq.arrow_arrays import arrow_array

_DTYPES = st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                           np.float32, np.float64, np.bool_])


@settings(max_examples=200, deadline=None)
@given(_DTYPES.flatmap(lambda d: hnp.arrays(d, st.integers(0, 40))), st.booleans())
def test_numeric_arrays_equal_pyarrows(values, strided):
    if strided:
        values = values[::2]
    got, want = arrow_array(values), pa.array(values)
    assert got.type == want.type and got.null_count == want.null_count == 0, (values, got, want)
    # Arrow's equals() holds NaN unequal to itself: compare the values, NaN equal to NaN
    assert np.array_equal(got.to_numpy(zero_copy_only=False), want.to_numpy(zero_copy_only=False),
                          equal_nan=values.dtype.kind == "f"), (values, got, want)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text()), max_size=30))
def test_string_arrays_equal_pyarrows(items):
    values = np.array(items, dtype=object)
    got, want = arrow_array(values), pa.array(values)
    assert got.type == want.type and got.equals(want), (items, got, want)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(st.integers(-5, 5), st.floats(allow_nan=False), st.text(max_size=3)), min_size=1, max_size=8))
def test_other_object_arrays_are_handed_to_pyarrow(items):
    values = np.array(items, dtype=object)
    try:
        want = pa.array(values)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        want = type(exc)
    try:
        got = arrow_array(values)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        got = type(exc)
    if isinstance(want, pa.Array):
        assert isinstance(got, pa.Array) and got.type == want.type and got.equals(want), (items, got, want)
    else:
        assert got is want, (items, got, want)


def test_no_pandas_is_imported():
    import subprocess
    import sys

    probe = ("import sys, numpy as np; from pdbq.arrow_arrays import arrow_array; "
             "arrow_array(np.arange(3)); arrow_array(np.array(['a', None], dtype=object)); "
             "arrow_array(np.zeros(2, bool)); print('pandas' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=False)
    assert p.stdout.strip() == "False", p.stderr[-2000:]
