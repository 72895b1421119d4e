"""Token shards on disk: the manifest, each shard's header check, and memory-mapped views.

The layout is docs/token-shards.md (Note [token shard layout] in
include/luminamoon/token_shards.h); the C++ TokenShardWriter writes it.
"""
from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .pipeline import DataError

__all__ = ["TokenShardSet", "TokenShard", "MANIFEST_NAME"]

MANIFEST_NAME = "manifest.json"
_HEADER_BYTES = 64


def _native():
    from .. import _native as native
    if not hasattr(native, "_read_token_shard_header"):
        raise DataError("this build of luminamoon has no token shards (built without zlib)", 7)
    return native


@dataclass
class TokenShard:
    """One committed shard: its tokens and document offsets, memory-mapped on first use."""

    path: str
    documents: int
    tokens: int
    token_bytes: int
    _tokens: Any = None
    _offsets: Any = None

    def _map(self) -> None:
        dtype = np.uint16 if self.token_bytes == 2 else np.uint32
        self._tokens = np.memmap(self.path, dtype=dtype, mode="r", offset=_HEADER_BYTES,
                                 shape=(self.tokens,)) if self.tokens else np.zeros(0, dtype)
        at = (_HEADER_BYTES + self.tokens * self.token_bytes + 7) // 8 * 8
        self._offsets = np.memmap(self.path, dtype="<u8", mode="r", offset=at, shape=(self.documents + 1,))

    @property
    def token_ids(self) -> np.ndarray:
        if self._tokens is None:
            self._map()
        return self._tokens

    @property
    def doc_offsets(self) -> np.ndarray:
        """documents + 1 offsets in tokens: document d is token_ids[off[d]:off[d+1]]."""
        if self._offsets is None:
            self._map()
        return self._offsets

    def __getstate__(self) -> dict:  # worker processes map the file themselves
        return {"path": self.path, "documents": self.documents, "tokens": self.tokens,
                "token_bytes": self.token_bytes}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)


class TokenShardSet:
    """The committed shards of one token-shard directory, in manifest order.

    Every shard's header is checked against the manifest (documents, tokens,
    bytes, payload CRC32); ``verify=True`` also recomputes each payload's CRC32.
    A missing, unreadable or inconsistent file is a DataError (exit code 3)."""

    def __init__(self, path: Any, verify: bool = False) -> None:
        self.path = os.fspath(path)
        manifest_path = Path(self.path) / MANIFEST_NAME
        try:
            self.manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataError(f"token shards: no {MANIFEST_NAME} in {self.path} "
                            "(write them with luminamoon.data.tokenize_corpus)", 3) from None
        except (OSError, ValueError) as e:
            raise DataError(f"token shards: cannot read {manifest_path}: {e}", 3) from None
        if self.manifest.get("format") != "luminamoon-token-shards" or self.manifest.get("version") != 1:
            raise DataError(f"{manifest_path}: not a version-1 luminamoon token-shard manifest", 3)
        native = _native()
        self.token_bytes = int(self.manifest["token_bytes"])
        self.shards: list[TokenShard] = []
        for entry in self.manifest["shards"]:
            shard_path = os.path.join(self.path, entry["file"])
            header = native._read_token_shard_header(shard_path)
            for key in ("documents", "tokens", "bytes", "payload_crc32"):
                if header[key] != entry[key]:
                    raise DataError(f"token shard {shard_path}: {key} is {header[key]} in the file "
                                    f"but {entry[key]} in the manifest", 3)
            if verify:
                self._verify_payload(shard_path, entry["payload_crc32"])
            self.shards.append(TokenShard(shard_path, entry["documents"], entry["tokens"], self.token_bytes))
        self.documents = sum(s.documents for s in self.shards)
        self.tokens = sum(s.tokens for s in self.shards)

    @staticmethod
    def _verify_payload(path: str, expected: int) -> None:
        crc = 0
        with open(path, "rb") as f:
            f.seek(_HEADER_BYTES)
            while chunk := f.read(1 << 22):
                crc = zlib.crc32(chunk, crc)
        if crc != expected:
            raise DataError(f"token shard {path}: payload CRC32 {crc:#010x} != {expected:#010x} "
                            "(the file is damaged)", 3)

    @property
    def metadata(self) -> dict:
        return dict(self.manifest.get("metadata", {}))

    def documents_tokens(self):
        """Every document's token ids in order (for tests and exports)."""
        for shard in self.shards:
            ids, off = shard.token_ids, shard.doc_offsets
            for d in range(shard.documents):
                yield ids[off[d]:off[d + 1]]
