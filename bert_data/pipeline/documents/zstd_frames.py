"""A truncated zstd file is an error, not a shorter text.

``zstandard``'s stream reader returns what it decoded when its input ends inside a frame, so a
file cut short reads as a shorter text without a word.  ``FrameCheckedFile`` stands between the
file and the decompressor and follows the frame structure of the bytes passing through (frame
headers, block headers, the optional checksum, skippable frames: RFC 8878), reading nothing
more; a file that ends anywhere but at the end of a frame raises ``TruncatedZstd``.

Corruption inside a block is the decompressor's to find: it fails on a malformed block, and on
altered content only when the frame carries a checksum (the ``zstd`` command writes one by
default; ``--no-check`` and ``zstandard.ZstdCompressor()`` do not).
"""

from __future__ import annotations

from typing import BinaryIO

ZSTD_MAGIC = 0xFD2FB528
SKIPPABLE_MAGIC_MASK, SKIPPABLE_MAGIC = 0xFFFFFFF0, 0x184D2A50
_DICTIONARY_ID_BYTES = (0, 1, 2, 4)
_CONTENT_SIZE_BYTES = (0, 2, 4, 8)  # by the Frame_Content_Size flag (0: 1 byte for a single segment)
_RAW, _RLE, _COMPRESSED = 0, 1, 2

# What the next bytes are.
_MAGIC, _FRAME_HEADER, _SKIPPABLE_SIZE, _BLOCK_HEADER = range(4)


class TruncatedZstd(ValueError):
    """The file ends inside a zstd frame (or is not a sequence of zstd frames)."""


class FrameCheckedFile:
    """A binary file object whose ``read`` follows the zstd frames in the bytes it returns."""

    def __init__(self, raw: BinaryIO, name: str = ""):
        self.raw, self.name = raw, name
        self.state = _MAGIC
        self.header = bytearray()  # the header being read (it may span reads)
        self.skip = 0  # content bytes to pass before the next header
        self.checksum = False  # the frame being read ends with a 4-byte checksum
        self.offset = 0  # bytes read of the file
        self.following = True  # False once the bytes are not frames this module knows

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        if data and self.following:
            self._follow(memoryview(data))
            self.offset += len(data)
        elif size != 0 and self.following and not self.at_frame_end:
            raise TruncatedZstd(f"file ends inside a zstd frame after {self.offset:,} bytes (truncated)")
        return data

    @property
    def at_frame_end(self) -> bool:
        return self.state == _MAGIC and not self.header and not self.skip

    def _follow(self, data: memoryview) -> None:
        position = 0
        while position < len(data) and self.following:
            if self.skip:
                step = min(self.skip, len(data) - position)
                self.skip -= step
                position += step
                continue
            need = self._header_size(self.header)
            take = min(need - len(self.header), len(data) - position)
            self.header += data[position : position + take]
            position += take
            if len(self.header) == need:
                self._header_read()

    def _header_size(self, header) -> int:
        """Bytes of the current header, as far as its known bytes (``header``) tell."""
        if self.state == _MAGIC:
            return 4
        if self.state == _SKIPPABLE_SIZE:
            return 8
        if self.state == _BLOCK_HEADER:
            return 3
        if len(header) < 5:  # the magic number and the frame header descriptor
            return 5
        descriptor = header[4]
        single_segment = bool(descriptor & 0x20)
        content_flag = descriptor >> 6
        content_size = _CONTENT_SIZE_BYTES[content_flag] or (1 if single_segment else 0)
        return 5 + (0 if single_segment else 1) + _DICTIONARY_ID_BYTES[descriptor & 3] + content_size

    def _header_read(self) -> None:
        header, self.header = bytes(self.header), bytearray()
        if self.state == _MAGIC:
            magic = int.from_bytes(header, "little")
            if magic == ZSTD_MAGIC:
                self.state, self.header = _FRAME_HEADER, bytearray(header)
            elif magic & SKIPPABLE_MAGIC_MASK == SKIPPABLE_MAGIC:
                self.state, self.header = _SKIPPABLE_SIZE, bytearray(header)
            else:  # not a frame of RFC 8878 (a legacy format, or no zstd at all): the decompressor judges
                self.following = False
        elif self.state == _SKIPPABLE_SIZE:
            self.state, self.skip = _MAGIC, int.from_bytes(header[4:8], "little")
        elif self.state == _FRAME_HEADER:
            if len(header) < self._header_size(header):  # the descriptor asks for more
                self.header = bytearray(header)
                return
            self.checksum = bool(header[4] & 0x04)
            self.state = _BLOCK_HEADER
        else:
            value = int.from_bytes(header, "little")
            last, kind, size = value & 1, (value >> 1) & 3, value >> 3
            if kind == 3:
                raise TruncatedZstd(f"corrupt zstd block header at byte {self.offset:,}")
            self.skip = 1 if kind == _RLE else size
            if last:
                self.skip += 4 if self.checksum else 0
                self.state = _MAGIC

    def close(self) -> None:
        self.raw.close()

    @property
    def closed(self) -> bool:
        return getattr(self.raw, "closed", False)
