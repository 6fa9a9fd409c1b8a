"""Words of bytes read and written at any address, for the compiled TFRecord encoder
(:mod:`.example_kernels`): plain Python functions (the kernel's uncompiled fallback), one unaligned
load or store instruction each in a kernel (:func:`register_word_access`).

numba indexes arrays by element (a word would be 8 loads or stores and the shifts that join
them), and an array handed to a helper, or taken from a tuple of arrays, for each record and
feature costs numba's reference counting, two calls of atomic operations each (most of the time
the encoder took at first): the kernel takes each array's :func:`address` once a call and reads
and writes at it plus a byte offset, keeping every offset inside an array that lives until it
returns.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["address", "load1", "load2", "load4", "load8", "store1", "store4", "store8", "register_word_access"]


def address(array):
    """Where the contiguous ``array``'s bytes start in memory (the caller keeps it alive)."""
    return array.ctypes.data


def load_bytes(address, size):
    """The little-endian unsigned integer of the ``size`` bytes at ``address``, as uint64."""
    import ctypes

    return np.uint64(int.from_bytes(ctypes.string_at(int(address), int(size)), "little"))


def load1(address):
    return load_bytes(address, 1)


def load2(address):
    return load_bytes(address, 2)


def load4(address):
    return load_bytes(address, 4)


def load8(address):
    return load_bytes(address, 8)


def store_bytes(address, word, size):
    """The ``size`` low bytes of ``word`` at ``address``, little-endian."""
    import ctypes

    ctypes.memmove(int(address), int(word).to_bytes(8, "little"), int(size))


def store1(address, word):
    store_bytes(address, word, 1)


def store4(address, word):
    store_bytes(address, word, 4)


def store8(address, word):
    store_bytes(address, word, 8)



@functools.lru_cache(maxsize=None)
def register_word_access() -> None:
    """:func:`address`, :func:`load1` ... :func:`load8` and :func:`store1` ... :func:`store8` in
    kernels: a contiguous uint8 array's data pointer as an integer; one unaligned load or store
    at an address.  The callers keep every address inside an array that is alive.  Registered
    on first use, before the kernel that calls them compiles (importing numba at import is what
    ``bert_data.compiled`` avoids)."""
    from llvmlite import ir
    from numba import types
    from numba.core.errors import TypingError
    from numba.extending import intrinsic, overload

    def contiguous_bytes(array):
        if not (isinstance(array, types.Array) and array.dtype == types.uint8 and array.layout == "C"):
            raise TypingError(f"word access reads a contiguous uint8 array, not {array}")

    @intrinsic
    def data_address(typingctx, array):
        contiguous_bytes(array)

        def codegen(context, builder, signature, args):
            data = context.make_array(signature.args[0])(context, builder, args[0]).data
            return builder.ptrtoint(data, ir.IntType(64))

        return types.intp(array), codegen

    def load_of(bits):
        @intrinsic
        def load(typingctx, at):
            def codegen(context, builder, signature, args):
                value = builder.load(builder.inttoptr(args[0], ir.IntType(bits).as_pointer()), align=1)
                return value if bits == 64 else builder.zext(value, ir.IntType(64))

            return types.uint64(types.intp), codegen

        return load

    def store_of(bits):
        @intrinsic
        def store(typingctx, at, word):
            def codegen(context, builder, signature, args):
                value = args[1] if bits == 64 else builder.trunc(args[1], ir.IntType(bits))
                builder.store(value, builder.inttoptr(args[0], ir.IntType(bits).as_pointer()), align=1)
                return context.get_dummy_value()

            return types.void(types.intp, types.uint64), codegen

        return store

    def overload_load(function, bits):
        load = load_of(bits)
        overload(function)(lambda at: lambda at: load(at))

    def overload_store(function, bits):
        store = store_of(bits)
        overload(function)(lambda at, word: lambda at, word: store(at, word))

    overload(address)(lambda array: lambda array: data_address(array))
    for function, bits in ((load1, 8), (load2, 16), (load4, 32), (load8, 64)):
        overload_load(function, bits)
    for function, bits in ((store1, 8), (store4, 32), (store8, 64)):
        overload_store(function, bits)
