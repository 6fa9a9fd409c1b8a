"""CRC-32C of consecutive ranges combined without reading them again (``work_checks.crc32c_combine``,
what the parent keeps of each shard as it appends units): by table lookups it is exactly zlib's
bitwise combination (``_crc32c_combine_bitwise``) and the CRC of the ranges end to end."""

from __future__ import annotations

import random

from bert_data.run.work_checks import _crc32c_combine_bitwise, crc32c, crc32c_combine


def test_combined_is_the_crc_of_both_ranges():
    rng = random.Random(7)
    for _ in range(300):
        a = rng.randbytes(rng.randrange(0, 300))
        b = rng.randbytes(rng.choice([0, 1, 2, 3, 7, 8, 255, 256, 4097, rng.randrange(0, 70_000)]))
        assert crc32c_combine(crc32c(a), crc32c(b), len(b)) == crc32c(a + b)


def test_lookups_are_the_bitwise_combination():
    rng = random.Random(8)
    lengths = [0, 1, 2**31 - 1, 2**32, 2**40 + 12345, 2**62 + 3] + [rng.randrange(0, 2**45) for _ in range(500)]
    for length in lengths:
        crc1, crc2 = rng.getrandbits(32), rng.getrandbits(32)
        assert crc32c_combine(crc1, crc2, length) == _crc32c_combine_bitwise(crc1, crc2, length)
