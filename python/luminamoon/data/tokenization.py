"""The tokenization stage: kept documents -> Hugging Face `tokenizers` -> token shards + Megatron .bin/.idx.

Documents come from the C++ reader (the FusedPipeline's stream, every stage
off, or the configured stages), are encoded in batches by
``Tokenizer.encode_batch`` (Rust, parallel, GIL released), get the
end-of-document token appended and go to the C++ TokenShardWriter, which
publishes each shard with the text writers' commit order; a StateTracker
checkpoint follows each shard (Note [tokenize resume]).
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable, Optional

import numpy as np

from .pipeline import DataError, FusedPipeline, PipelineConfig, resolve_inputs
from .state import StateTracker

__all__ = ["DEFAULT_EOS", "load_tokenizer", "train_bpe_tokenizer", "tokenize_corpus", "encode_documents",
           "committed_part_files"]

DEFAULT_EOS = "<|endoftext|>"

# Note [tokenize resume]
# A shard closes after the first document that takes it to shard_max_tokens,
# so where shards are cut depends on the documents only, never on batching.
# Commit order per shard: shard file fsynced and renamed, manifest.json
# rewritten atomically (both in C++), then the .meta slot records the
# documents consumed (coordinate.global_row_idx) and the shards committed
# (output_position). A restart discards shards past the checkpoint, skips the
# consumed documents and re-encodes the rest, so a run killed at any instant
# ends with files identical to an uninterrupted run's. tokenize.json pins the
# tokenizer (SHA-256), the end-of-document id and the inputs: a resume with
# others is refused (exit 5).


def load_tokenizer(path: Any):
    """A `tokenizers.Tokenizer` from a tokenizer.json; DataError(exit 3) when it does not parse."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise DataError("tokenization needs the Hugging Face tokenizers package "
                        "(pip install tokenizers)", 7) from None
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DataError(f"tokenizer file not found: {path}", 3)
    try:
        return Tokenizer.from_file(path)
    except Exception as e:  # tokenizers raises its own Exception for a bad file
        raise DataError(f"cannot parse tokenizer file {path}: {e}", 3) from None


def train_bpe_tokenizer(texts: Iterable[str], vocab_size: int = 4096, *, eos_token: str = DEFAULT_EOS,
                        path: Any = None, min_frequency: int = 2):
    """A byte-level BPE tokenizer trained with `tokenizers`' own trainer (nothing is downloaded)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=[eos_token],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    if path is not None:
        tok.save(os.fspath(path))
    return tok


def _eos_id(tokenizer, eos_token: str) -> int:
    eos = tokenizer.token_to_id(eos_token)
    if eos is None:
        raise DataError(f"the tokenizer has no end-of-document token '{eos_token}' "
                        "(pass eos_token=... / --eos-token)", 2)
    return int(eos)


def encode_documents(tokenizer, texts: list, eos_id: int) -> tuple[np.ndarray, np.ndarray]:
    """(token ids as uint32, tokens per document) with eos_id after each document."""
    encodings = tokenizer.encode_batch_fast(texts) if hasattr(tokenizer, "encode_batch_fast") \
        else tokenizer.encode_batch(texts)
    lists = [e.ids for e in encodings]
    lengths = np.fromiter((len(ids) + 1 for ids in lists), dtype=np.uint64, count=len(lists))
    flat = np.empty(int(lengths.sum()), dtype=np.uint32)
    ends = np.cumsum(lengths)
    flat[(ends - 1).astype(np.int64)] = eos_id
    mask = np.ones(flat.size, dtype=bool)
    mask[(ends - 1).astype(np.int64)] = False
    flat[mask] = np.fromiter((t for ids in lists for t in ids), dtype=np.uint32, count=int(mask.sum()))
    return flat, lengths


def _file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _native():
    from .. import _native as native
    if not hasattr(native, "_TokenShardWriter"):
        raise DataError("this build of luminamoon has no token shards (built without zlib)", 7)
    return native


def _reader_config(config: Optional[PipelineConfig], text_field: str) -> PipelineConfig:
    if config is not None:
        return config
    return PipelineConfig(text_field=text_field, clean=False, quality=False, dedup=False, minhash=False,
                          pii=False, format="ndjson")


def tokenize_corpus(inputs: Any, output_dir: Any, tokenizer: Any, *, eos_token: str = DEFAULT_EOS,
                    text_field: str = "text", batch_docs: int = 1024, shard_max_tokens: int = 64 << 20,
                    megatron_prefix: Optional[str] = "megatron/corpus", resume: bool = True,
                    pipeline_config: Optional[PipelineConfig] = None) -> dict:
    """Tokenizes every document of `inputs` into token shards under `output_dir`.

    `tokenizer`: a path to a tokenizer.json. `pipeline_config`: the stages run
    before tokenizing (default: none, the documents as read). Writes
    output_dir/shard-*.tok, manifest.json (docs/token-shards.md),
    tokenize.meta, tokenize.json and, unless megatron_prefix is None, the
    Megatron indexed dataset output_dir/<prefix>.bin/.idx. Resumes a stopped
    run (Note [tokenize resume]). Returns a summary dict."""
    tokenizer_path = os.fspath(tokenizer)
    tok = load_tokenizer(tokenizer_path)
    eos_id = _eos_id(tok, eos_token)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    token_bytes = 2 if vocab <= 1 << 16 else 4
    shards_in = resolve_inputs(inputs)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    identity = {"tokenizer_sha256": _file_sha256(tokenizer_path), "eos_token": eos_token, "eos_id": eos_id,
                "vocab_size": vocab, "inputs": [os.path.abspath(s) for s in shards_in],
                "shard_max_tokens": int(shard_max_tokens), "text_field": text_field}
    record = out / "tokenize.json"
    tracker = StateTracker(out / "tokenize.meta")
    checkpoint = tracker.load() if resume else None
    if checkpoint is not None:
        try:
            previous = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise DataError(f"{out}: tokenize.meta exists but tokenize.json is missing or damaged; "
                            "remove the directory to start over", 4) from None
        if previous != identity:
            changed = sorted(k for k in identity if previous.get(k) != identity[k])
            raise DataError(f"{out}: the checkpointed tokenization used other settings ({', '.join(changed)}); "
                            "use a new output directory", 5)
    else:
        if not resume and tracker.exists():
            os.unlink(tracker.path)
        tmp = record.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(identity, indent=1), encoding="utf-8")
        os.replace(tmp, record)
    metadata = {k: identity[k] for k in ("tokenizer_sha256", "eos_token", "eos_id", "vocab_size")}
    writer = _native()._TokenShardWriter(str(out), token_bytes, int(shard_max_tokens), json.dumps(metadata))
    committed_shards = checkpoint["output_position"] if checkpoint else 0
    consumed = checkpoint["coordinate"]["global_row_idx"] if checkpoint else 0
    writer.discard_uncommitted(committed_shards)
    finished = bool(checkpoint and checkpoint["finished"])

    if not finished:
        skip = consumed
        pending_tokens = 0
        pipeline = FusedPipeline(_reader_config(pipeline_config, text_field))
        docs: list = []

        def flush(texts: list) -> None:
            nonlocal consumed, pending_tokens
            if not texts:
                return
            ids, lengths = encode_documents(tok, texts, eos_id)
            ends = np.cumsum(lengths).astype(np.int64)
            i, n = 0, len(texts)
            while i < n:
                # Cut after the first document that fills the shard (Note [tokenize resume]).
                before = int(ends[i - 1]) if i else 0
                need = int(shard_max_tokens) - pending_tokens
                j = min(i + int(np.searchsorted(ends[i:] - before, need, side="left")), n - 1)
                writer.add_documents(ids[before:int(ends[j])], lengths[i:j + 1])
                pending_tokens += int(ends[j]) - before
                consumed += j + 1 - i
                i = j + 1
                if pending_tokens >= int(shard_max_tokens):
                    writer.write_shard()
                    tracker.commit({"global_row_idx": consumed}, len(writer.committed()))
                    pending_tokens = 0

        for batch in pipeline.stream(shards_in):
            texts = list(batch.text)
            if skip:
                dropped = min(skip, len(texts))
                texts, skip = texts[dropped:], skip - dropped
            docs.extend(texts)
            while len(docs) >= batch_docs:
                flush(docs[:batch_docs])
                docs = docs[batch_docs:]
        flush(docs)
        if not writer.shard_empty:
            writer.write_shard()
        tracker.commit({"global_row_idx": consumed}, len(writer.committed()), finished=True)

    shards = writer.committed()
    summary = {"documents": sum(s["documents"] for s in shards), "tokens": sum(s["tokens"] for s in shards),
               "shards": len(shards), "token_bytes": token_bytes, "eos_id": eos_id, "output": str(out)}
    if megatron_prefix:
        prefix = out / megatron_prefix
        if not Path(str(prefix) + ".idx").exists():
            prefix.parent.mkdir(parents=True, exist_ok=True)
            _native()._export_megatron([str(out / s["file"]) for s in shards], str(prefix))
        summary["megatron_prefix"] = str(prefix)
    return summary


def committed_part_files(output_dir: Any) -> list[str]:
    """The part files a FusedPipeline run committed, in stream order (readable formats only)."""
    parts = sorted(glob.glob(os.path.join(os.fspath(output_dir), "part-*.parquet")) +
                   glob.glob(os.path.join(os.fspath(output_dir), "part-*.ndjson")))
    return parts
