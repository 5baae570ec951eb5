"""Where raw records come from: every source yields ``(source, offset, raw)`` triples.

The embedded default reads a transactions CSV as a bounded source. The file is split client-side
into byte ranges that end on line boundaries, each with the line number it starts at, so the job
streams a file of any size and every record keeps its line number (its offset) for rejects and
stable event ids.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from ingest.amlworld import check_header

DEFAULT_CHUNK_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class FileChunk:
    path: str
    start: int  # byte offset of the chunk's first line
    end: int  # byte offset just past its last line
    first_line: int  # 1-based line number of its first line

    def as_tuple(self) -> tuple[str, int, int, int]:
        return (self.path, self.start, self.end, self.first_line)


def split_file(path: str, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> tuple[list[FileChunk], int]:
    """Split a CSV after its header into line-aligned chunks; returns (chunks, data line count)."""
    path = os.path.abspath(path)
    chunks: list[FileChunk] = []
    with open(path, "rb") as fh:
        header = fh.readline()
        check_header(header.decode("utf-8-sig", errors="replace"), path)
        pos, line = len(header), 2
        total = 0
        while True:
            block = fh.read(chunk_bytes)
            if not block:
                break
            rest = b"" if block.endswith(b"\n") else fh.readline()
            block += rest
            n = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
            chunks.append(FileChunk(path, pos, pos + len(block), line))
            pos += len(block)
            line += n
            total += n
    return chunks, total


def read_chunk(chunk: tuple[str, int, int, int]) -> Iterator[tuple[str, int, str]]:
    """Yield ``(source, line number, raw line)`` for one chunk."""
    path, start, end, first_line = chunk
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    for i, raw in enumerate(lines):
        yield path, first_line + i, raw.decode("utf-8", errors="replace").rstrip("\r")
