"""The frames' CRC-32C in the compiled TFRecord encoder (``example_kernels._frame_crc``): the
CPU's instruction where numba compiles for a CPU that has it, slicing-by-8 elsewhere, the same
masked CRCs as the ``crc32c`` package for every length and alignment; and numba's on-disk cache
never handing a kernel compiled with the instruction to a process compiling for a CPU without
it (the choice follows the features in numba's cache key)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bert_data.compiled import DISABLE_VARIABLE
from bert_data.format.tfrecord import example_kernels
from bert_data.format.tfrecord.example_kernels import crc_instructions
from bert_data.format.tfrecord.records import masked_crc32c

REPO = Path(__file__).resolve().parents[2]
# The instructions in the machine code: x86-64 crc32q/crc32b (AT&T), AArch64 crc32cx/crc32cb.
CRC_MNEMONIC = re.compile(r"\bcrc32(q|b|cx|cb)\b")


@pytest.fixture
def kernels_on(monkeypatch):
    monkeypatch.setenv(DISABLE_VARIABLE, "1")
    assert example_kernels.encode_records() is not None, "numba is a dev dependency: the kernels must run here"


def _host_features() -> str:
    import llvmlite.binding as llvm

    if os.environ.get("NUMBA_CPU_FEATURES") is not None:
        return os.environ["NUMBA_CPU_FEATURES"]
    return "" if os.environ.get("NUMBA_CPU_NAME", "").lower() == "generic" else llvm.get_host_cpu_features().flatten()


def test_which_instructions_llvm_features_allow():
    assert crc_instructions("x86_64-unknown-linux-gnu", "+64bit,+avx,+crc32,+sse4.1,+sse4.2") == "x86"
    assert crc_instructions("x86_64-pc-windows-msvc", "+sse4.2") == "x86"  # (LLVM before 14: no crc32 feature)
    assert crc_instructions("x86_64-unknown-linux-gnu", "+sse4.2,-crc32") is None
    assert crc_instructions("x86_64-unknown-linux-gnu", "+64bit,+sse2,-crc32,-sse4.2") is None
    assert crc_instructions("x86_64-unknown-linux-gnu", "") is None  # NUMBA_CPU_NAME=generic
    assert crc_instructions("aarch64-unknown-linux-gnu", "+neon,+crc") == "aarch64"
    assert crc_instructions("arm64-apple-darwin", "+crc,+neon") == "aarch64"
    assert crc_instructions("aarch64-unknown-linux-gnu", "+neon,-crc") is None
    assert crc_instructions("aarch64_be-unknown-linux-gnu", "+crc") is None  # (words read little-endian)
    assert crc_instructions("powerpc64le-unknown-linux-gnu", "+crc,+sse4.2,+crc32") is None
    assert crc_instructions("i686-pc-linux-gnu", "+sse4.2,+crc32") is None


@pytest.mark.parametrize("instructions, triple, features, mnemonics", [
    ("x86", "x86_64-unknown-linux-gnu", "+crc32,+sse4.2", ("crc32q", "crc32b")),
    ("aarch64", "aarch64-unknown-linux-gnu", "+crc", ("crc32cx", "crc32cb")),
])
def test_the_instructions_ir_compiles_for_each_architecture(instructions, triple, features, mnemonics):
    """The IR of both instructions (a word, a byte) assembled for each architecture's CPU with the
    feature, whichever machine runs the test (AArch64's cannot run here: LLVM's assembler is what
    checks it names an instruction of that architecture, with the types it takes)."""
    import llvmlite.binding as llvm
    from llvmlite import ir

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    module = ir.Module()
    module.triple = triple
    for name, width in (("word", 64), ("byte", 8)):
        function = ir.Function(module, ir.FunctionType(ir.IntType(32), [ir.IntType(32), ir.IntType(width)]), name)
        builder = ir.IRBuilder(function.append_basic_block())
        builder.ret(example_kernels.crc_instruction_ir(builder, instructions, *function.args))
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    assembly = llvm.Target.from_triple(triple).create_target_machine(features=features).emit_assembly(parsed)
    assert [mnemonic for mnemonic in mnemonics if re.search(rf"\b{mnemonic}\b", assembly)] == list(mnemonics)
    with pytest.raises(ValueError, match="no CRC-32C instructions"):
        example_kernels.crc_instruction_ir(builder, None, *function.args)


def test_the_instruction_runs_where_the_cpu_has_it(kernels_on):
    import llvmlite.binding as llvm

    expected = crc_instructions(llvm.get_process_triple(), _host_features()) is not None
    assert example_kernels.hardware_crc() is expected


def frame_crcs_kernel():
    """A kernel giving ``_frame_crc`` of ``out[firsts[i]:ends[i]]`` for each ``i`` (``tables``: None,
    the instruction where the CPU has it; or the slicing-by-8 tables); a new compiled function each
    call, so that each test inspects only the signatures it compiled."""
    import numba

    frame_crc = example_kernels._frame_crc

    @numba.njit
    def crcs(out, firsts, ends, tables):
        result = np.empty(firsts.shape[0], np.uint32)
        for i in range(firsts.shape[0]):
            result[i] = frame_crc(out, firsts[i], ends[i], tables)
        return result

    return crcs


def test_masked_crcs_of_every_length_and_alignment(kernels_on):
    """Both kernels' CRCs (None: the instruction here; the tables: slicing-by-8) of random
    buffers of 0..300 bytes starting at each of the 8 offsets from a word boundary, against
    ``crc32c.crc32c`` (``records.masked_crc32c``); and the instruction is in the machine code."""
    crcs = frame_crcs_kernel()

    rng = np.random.default_rng(27)
    out = rng.integers(0, 256, 4096 + 8, dtype=np.uint8)
    base = -out.ctypes.data % 8  # where a word of ``out`` starts
    lengths, offsets = np.meshgrid(np.arange(301), np.arange(8))
    firsts = (base + offsets.ravel() + 8 * rng.integers(0, 400, lengths.size)).astype(np.int64)
    ends = firsts + lengths.ravel()
    assert ((firsts - base) % 8 == offsets.ravel()).all() and ends.max() <= out.size
    expected = np.array([masked_crc32c(out[a:b].tobytes()) for a, b in zip(firsts, ends)], dtype=np.uint32)
    chosen = crcs(out, firsts, ends, None)
    software = crcs(out, firsts, ends, example_kernels.crc32c_tables())
    assert np.array_equal(software, expected)
    assert np.array_equal(chosen, expected)
    machine_code = {str(signature[3]): crcs.inspect_asm(signature) for signature in crcs.signatures}
    assert bool(CRC_MNEMONIC.search(machine_code["none"])) is example_kernels.hardware_crc()
    assert not CRC_MNEMONIC.search(machine_code["array(uint32, 2d, C)"])


def test_three_streams_of_the_instruction_join_to_the_crc(kernels_on):
    """The instruction's loop runs three streams of ``CRC_STREAM`` bytes at once and joins their
    CRCs (``crc32c_zeros``): lengths on each side of every multiple of the three streams, at
    each alignment, against ``crc32c.crc32c``, both kernels."""
    crcs = frame_crcs_kernel()
    block = 3 * example_kernels.CRC_STREAM

    rng = np.random.default_rng(31)
    out = rng.integers(0, 256, 4 * block + 64, dtype=np.uint8)
    lengths = np.array([m * block + d for m in (1, 2, 3) for d in (-9, -8, -1, 0, 1, 7, 8, 13)] * 8)
    firsts = np.repeat(np.arange(8), lengths.size // 8).astype(np.int64)
    ends = firsts + lengths
    expected = np.array([masked_crc32c(out[a:b].tobytes()) for a, b in zip(firsts, ends)], dtype=np.uint32)
    assert np.array_equal(crcs(out, firsts, ends, None), expected)
    assert np.array_equal(crcs(out, firsts, ends, example_kernels.crc32c_tables()), expected)


def test_the_zeros_tables_move_a_crc_past_zero_bytes():
    """``crc32c_zeros(n)`` applied to a register is the byte-at-a-time loop over ``n`` zeros."""
    step = example_kernels.crc32c_tables()[0]
    for length in (0, 1, 5, example_kernels.CRC_STREAM):
        zeros = example_kernels.crc32c_zeros(length)
        for register in (0, 1, 0xFFFFFFFF, 0x12345678, 0x80000000):
            moved = register
            for _ in range(length):
                moved = int(step[moved & 0xFF]) ^ (moved >> 8)
            tables = int(zeros[0, register & 0xFF] ^ zeros[1, (register >> 8) & 0xFF]
                         ^ zeros[2, (register >> 16) & 0xFF] ^ zeros[3, register >> 24])
            assert tables == moved

_PROCESS = """
import hashlib, json, re, sys
import numpy as np
from bert_data.format.layout import feature_specs
from bert_data.format.tfrecord import example_encoding, example_kernels
from bert_data.format.tfrecord.records import frame_records

specs = feature_specs(max_seq_length=64, max_predictions_per_seq=10)
rng = np.random.default_rng(4)
columns = {spec.name: rng.integers(0, 30522, (200, spec.length)) if spec.dtype == "int64"
           else rng.random((200, spec.length)).astype(np.float32) for spec in specs}
framed = example_encoding.encode_framed(columns, specs)
encode = example_kernels.encode_records()
stats = encode.stats
compiled_here = sum(stats.cache_misses.values()) > 0
machine_code = encode.inspect_asm(encode.signatures[0]) if compiled_here else ""
print(json.dumps({"sha256": hashlib.sha256(framed).hexdigest(), "hardware": example_kernels.hardware_crc(),
                  "cache_hits": sum(stats.cache_hits.values()), "cache_misses": sum(stats.cache_misses.values()),
                  "instruction_in_code": bool(re.search(sys.argv[1], machine_code)),
                  "crc32c_package_frames": framed == frame_records(example_encoding.encode_examples(columns, specs))}))
"""


def _run(cache, **environment):
    env = {key: value for key, value in os.environ.items() if not key.startswith("NUMBA_CPU_")}
    env.update(NUMBA_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
               **{DISABLE_VARIABLE: "1"}, **environment)
    result = subprocess.run([sys.executable, "-c", _PROCESS, CRC_MNEMONIC.pattern], capture_output=True, text=True,
                            env=env, cwd=REPO, timeout=600)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_cache_keeps_a_kernel_per_cpu_features(tmp_path):
    """One numba cache, three processes: this CPU's (compiles, with the instruction where it has
    it), then one compiling for numba's generic CPU (no SSE4.2, no CRC extension: it must not
    load the first kernel; it compiles its own, with slicing-by-8), then this CPU's again (loads
    its own kernel, still there).  The same bytes each time, framed as the crc32c package frames."""
    import llvmlite.binding as llvm

    has_instruction = crc_instructions(llvm.get_process_triple(), llvm.get_host_cpu_features().flatten()) is not None
    host = _run(tmp_path)
    assert (host["cache_hits"], host["cache_misses"]) == (0, 1)
    assert host["hardware"] is host["instruction_in_code"] is has_instruction
    generic = _run(tmp_path, NUMBA_CPU_NAME="generic")
    assert (generic["cache_hits"], generic["cache_misses"]) == (0, 1)
    assert generic["hardware"] is generic["instruction_in_code"] is False
    again = _run(tmp_path)
    assert (again["cache_hits"], again["cache_misses"]) == (1, 0) and again["hardware"] is has_instruction
    assert host["sha256"] == generic["sha256"] == again["sha256"]
    assert host["crc32c_package_frames"] and generic["crc32c_package_frames"] and again["crc32c_package_frames"]
    assert len(list(tmp_path.rglob("*.nbc"))) >= 2  # (a kernel file per features, in one index)
