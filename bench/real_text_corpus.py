"""Real technical text from this machine's own documentation, for benchmarks
that must not rest on generated text alone: Debian changelogs and copyright
files under /usr/share/doc, and the READMEs, METADATA and docs of the
installed Python packages. Rebuildable on any Debian machine; the order is
deterministic (sorted paths), so the same machine gives the same corpus.

    python bench/real_text_corpus.py OUT_DIR [--max-mb 49] [--shards 8]

writes OUT_DIR/real-NNN.jsonl.gz ({"id", "text", "source"} per line).
Files are split at blank lines into documents of at most --doc-kb (4 KB by
default), as a crawler splits long pages; documents under 200 bytes are left out.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import site
import sys
import sysconfig

DOC_SUFFIXES = (".md", ".rst", ".txt")
DOC_NAMES = ("readme", "changelog", "changes", "news", "history", "authors", "license", "copying", "metadata")


def _read(path: str) -> str | None:
    try:
        if os.path.getsize(path) > 4_000_000:
            return None
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            raw = f.read()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
        return None
    return text if "\0" not in text else None


def source_files() -> list[str]:
    """Every documentation file the corpus is built from, sorted."""
    out = []
    for root, _, files in os.walk("/usr/share/doc"):
        for f in files:
            low = f.lower()
            if low == "copyright" or low.startswith(("changelog", "readme", "news")):
                out.append(os.path.join(root, f))
    roots = {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
    base = os.path.join(os.path.dirname(__file__), "..", ".venv")
    roots |= {os.path.join(base, "lib", d, "site-packages") for d in os.listdir(os.path.join(base, "lib"))} \
        if os.path.isdir(os.path.join(base, "lib")) else set()
    for r in sorted(os.path.realpath(r) for r in roots if os.path.isdir(r)):
        for root, dirs, files in os.walk(r):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for f in files:
                low = f.lower()
                stem = low.split(".")[0]
                if low.endswith(DOC_SUFFIXES) and (stem in DOC_NAMES or "/doc" in root or "/docs" in root) \
                        or low == "metadata" or stem in ("readme", "changelog", "license"):
                    out.append(os.path.join(root, f))
    return sorted(set(out))


def split_document(text: str, max_bytes: int) -> list[str]:
    """Pieces of at most about max_bytes, cut at blank lines."""
    pieces, cur, size = [], [], 0
    for para in text.split("\n\n"):
        n = len(para.encode()) + 2
        if cur and size + n > max_bytes:
            pieces.append("\n\n".join(cur))
            cur, size = [], 0
        cur.append(para)
        size += n
    if cur:
        pieces.append("\n\n".join(cur))
    return pieces


def documents(max_mb: float = 49.0, doc_kb: int = 4, seed: int = 0) -> list[dict]:
    """The corpus as a list of {"id", "text", "source"}, up to max_mb of text:
    every piece of every file, in a seeded shuffle (so that changelogs,
    copyright files and package docs mix), then the first max_mb."""
    docs, seen = [], set()
    for path in source_files():
        text = _read(path)
        if not text:
            continue
        key = hash(text)
        if key in seen:  # the same file installed twice (venvs sharing a package)
            continue
        seen.add(key)
        for k, piece in enumerate(split_document(text, doc_kb * 1024)):
            if len(piece) < 200:
                continue
            docs.append({"id": f"{path}#{k}", "text": piece, "source": path})
    random.Random(seed).shuffle(docs)
    total = 0
    for i, d in enumerate(docs):
        total += len(d["text"].encode())
        if total >= max_mb * 1e6:
            return docs[:i + 1]
    return docs


DEFAULT_CACHE = "/tmp/luminamoon-real-text.jsonl.gz"


def cached_texts(cache: str = DEFAULT_CACHE, limit: int | None = None) -> list[str]:
    """The texts of documents(), built once and kept in `cache` (gz JSONL)."""
    if not os.path.exists(cache):
        with gzip.open(cache, "wt", encoding="utf-8") as f:
            for d in documents():
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
    texts = []
    with gzip.open(cache, "rt", encoding="utf-8") as f:
        for line in f:
            if limit is not None and len(texts) >= limit:
                break
            texts.append(json.loads(line)["text"])
    return texts


def write_shards(docs: list[dict], out_dir: str, shards: int = 8) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    paths = [os.path.join(out_dir, f"real-{i:03d}.jsonl.gz") for i in range(shards)]
    per = (len(docs) + shards - 1) // shards
    for i, p in enumerate(paths):
        with gzip.open(p, "wt", encoding="utf-8", compresslevel=6) as f:
            for d in docs[i * per:(i + 1) * per]:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
    return paths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--max-mb", type=float, default=49.0)
    ap.add_argument("--doc-kb", type=int, default=4)
    ap.add_argument("--shards", type=int, default=8)
    a = ap.parse_args()
    docs = documents(a.max_mb, a.doc_kb)
    paths = write_shards(docs, a.out_dir, a.shards)
    mb = sum(len(d["text"].encode()) for d in docs) / 1e6
    print(json.dumps({"documents": len(docs), "mb": round(mb, 1), "shards": paths}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
