"""The judge <-> sandbox message format: exact round trips, and nothing but data decoded."""
from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from autograder.sandbox import wire


def roundtrip(value):
    blobs: list[bytes] = []
    frame = wire.pack({"v": wire.encode(value, blobs)}, blobs)
    r, w = os.pipe()
    wire.write(w, frame)
    os.close(w)
    message, got = wire.Reader(r, 1 << 24).read()
    os.close(r)
    return wire.decode(message["v"], got)


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(dtype=st.sampled_from([np.float64, np.float32, np.int64, np.bool_, np.complex128]),
                  shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)))
def test_arrays_of_any_shape_and_dtype_come_back_exactly(array):
    got = roundtrip(array)
    assert got.shape == array.shape and got.dtype == array.dtype
    assert np.array_equal(got, array, equal_nan=array.dtype.kind in "fc")


def test_containers_scalars_and_indices_come_back_as_their_own_types():
    value = (1, 2.5, "s", None, True, [np.float32(1.5), {"k": (slice(1, None, 2), Ellipsis)}], np.dtype("float32"),
             complex(1, 2), float("nan"))
    got = roundtrip(value)
    assert got[:5] == (1, 2.5, "s", None, True) and type(got[5][0]) is np.float32
    assert got[5][1] == {"k": (slice(1, None, 2), Ellipsis)} and got[6] == np.float32 and got[7] == 1 + 2j
    assert np.isnan(got[8])


def test_objects_cannot_be_sent_without_a_handle_and_object_arrays_never_decode():
    with pytest.raises(wire.WireError):
        wire.encode(object(), [])
    with pytest.raises(wire.WireError):
        wire.encode(np.array([object()]), [])
    import io
    buffer = io.BytesIO()
    np.save(buffer, np.array([object()]), allow_pickle=True)  # what a hostile sandbox could send
    with pytest.raises(wire.WireError):
        wire.decode({"$a": 0}, [buffer.getvalue()])


@pytest.mark.parametrize("array", [np.asfortranarray(np.arange(12.0).reshape(3, 4)),
                                   np.arange(6, dtype=">i4").reshape(2, 3), np.zeros((0, 3), np.float32),
                                   np.array(2.5), np.array([True, False]), np.array(["ab", "c"])])
def test_arrays_decode_as_np_load_reads_them(array):
    """Arrays of numbers skip np.load (wire._numbers): the same dtype, shape, order and values."""
    got = roundtrip(array)
    assert got.dtype == array.dtype and got.shape == array.shape and np.array_equal(got, array)
    assert got.flags.f_contiguous == array.flags.f_contiguous and got.flags.writeable


def _npy(header: str, payload: bytes) -> bytes:
    text = header.encode() + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + payload


@pytest.mark.parametrize("blob", [
    _npy("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }", bytes(8)),   # less data than its shape
    _npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", bytes(16)),    # more
    _npy("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999, 2), }", bytes(8)),
    _npy("{'descr': '<f3', 'fortran_order': False, 'shape': (1,), }", bytes(3)),     # no such dtype
    _npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", bytes(8)),      # objects: np.load refuses
    _npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'x': 1}", bytes(8)),  # not np.save's header
])
def test_forged_array_headers_are_wire_errors(blob):
    with pytest.raises(wire.WireError):
        wire.decode({"$a": 0}, [blob])


@pytest.mark.parametrize("frame", [
    struct.pack("<II", 10**9, 0),                       # over the size limit
    struct.pack("<II", 5, 0) + b"nope!",               # not JSON
    struct.pack("<II", 2, 0) + b"[]",                  # not an object
    struct.pack("<II", 4000, 0) + b"[" * 2000 + b"]" * 2000,  # nested past the parser
])
def test_malformed_frames_are_wire_errors(frame):
    r, w = os.pipe()
    os.write(w, frame)
    os.close(w)
    with pytest.raises(wire.WireError):
        wire.Reader(r, 1 << 20).read()
    os.close(r)


@pytest.mark.parametrize("value", [{"$a": 3}, {"$x": 1}, {"$t": 5}, {"$d": [[1]]}, {"$h": "x"}, {"$dt": "O"},
                                   {"a": 1, "b": 2}, [1, 2]])
def test_malformed_values_are_wire_errors(value):
    with pytest.raises(wire.WireError):
        wire.decode(json.loads(json.dumps(value)), [])
