"""The kernel-parameter array handed to cuLaunchKernel: built once per shape, refilled per call.

What the driver reads is plain memory, so it is checked here by reading it back (no GPU needed).
"""

from __future__ import annotations

import ctypes

import pytest

pytest.importorskip("cuda.bindings")

from cuda.bindings import driver as cu

from evaluator.ptx.launch import ParamArray


def read(address: int, ctype: type) -> int:
    return ctypes.cast(address, ctypes.POINTER(ctype)).contents.value


def test_each_slot_points_at_a_value_of_the_declared_width() -> None:
    array = ParamArray(["ptr", "u32", "u64", "s32"], {1: 7168, 2: 2**40, 3: -5})
    array.set_pointer(0, 0xDEADBEEF000)
    assert read(array.slot(0), ctypes.c_uint64) == 0xDEADBEEF000
    assert read(array.slot(1), ctypes.c_uint32) == 7168
    assert read(array.slot(2), ctypes.c_uint64) == 2**40
    assert read(array.slot(3), ctypes.c_int32) == -5


def test_the_array_itself_holds_the_slot_addresses() -> None:
    array = ParamArray(["ptr", "u32"], {1: 3})
    assert array.pointer is not None
    raw = (ctypes.c_void_p * 2).from_address(array.pointer)
    assert [raw[0], raw[1]] == [array.slot(0), array.slot(1)]


def test_a_pointer_update_reuses_the_same_storage() -> None:
    array = ParamArray(["ptr"], {})
    array.set_pointer(0, 1)
    before = array.slot(0)
    array.set_pointer(0, 2)
    assert array.slot(0) == before and read(before, ctypes.c_uint64) == 2


def test_a_tensor_map_slot_points_at_the_map_itself() -> None:
    array = ParamArray(["tensormap", "ptr"], {})
    tensor_map = cu.CUtensorMap()  # an unencoded map: only its address matters here
    array.set_tensor_map(0, tensor_map)
    assert array.slot(0) == tensor_map.getPtr() and tensor_map in array.keep


def test_no_parameters_means_a_null_array() -> None:
    assert ParamArray([], {}).pointer is None
