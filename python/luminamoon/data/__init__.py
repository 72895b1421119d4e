"""luminamoon.data: the data engine's Python API.

- batch.py: StringTensor and the batch stages (clean, quality, PII).
- dedup.py: exact (StreamDeduplicator) and near (MinHashLSH) deduplication.
- pipeline.py: FusedPipeline, its config and errors.
- state.py: StateTracker (the .meta checkpoint) for a user's own loop.
- tokenization.py: the tokenization stage (Hugging Face tokenizers -> token shards, Megatron .bin/.idx).
- token_shards.py: reading token shards; token_loader.py: TokenLoader (packed, resumable batches).
- cli.py: ``luminamoon data ...``.
- ray_executor.py: the pipeline on Ray (``FusedPipeline.run(..., executor="ray")``), with
  global_dedup.py, the exact and near-duplicate decisions across shards (docs/ray.md).
"""
import importlib

# Note [lazy exports]: `luminamoon data run` needs pipeline.py alone, but
# importing every submodule here made each CLI start import numpy and the
# optimizer's extension as well (60 of its 135 ms, `python -X importtime`).
# A name is imported from its submodule on first use instead;
# tests/data/test_lazy_exports.py holds this table to the submodules' __all__.
_EXPORTS = {
    "batch": ("StringTensor", "QualityResult", "clean_batch", "filter_quality", "mask_pii", "quality_checks",
              "PII_TYPES", "INVALID_UTF8_POLICIES", "CLEAN_REASONS", "set_num_threads", "get_num_threads"),
    "dedup": ("StreamDeduplicator", "MinHashLSH", "DedupStateCorruptError", "estimated_jaccard", "dedup_normalize",
              "minhash_kernel_target", "MINHASH_PRIME"),
    "pipeline": ("FusedPipeline", "PipelineConfig", "StreamBatch", "DataError", "EXIT_CODES", "resolve_inputs",
                 "did_you_mean", "damerau_levenshtein", "arrow_io_available", "available_stages", "OUTPUT_FORMATS",
                 "EXECUTORS", "INPUT_EXTENSIONS"),
    "state": ("StateTracker", "COORDINATE_FIELDS"),
    "token_shards": ("TokenShardSet", "TokenShard", "MANIFEST_NAME"),
    "tokenization": ("DEFAULT_EOS", "load_tokenizer", "train_bpe_tokenizer", "tokenize_corpus", "encode_documents",
                     "committed_part_files"),
    "token_loader": ("TokenLoader", "TokenSource", "PackedSequenceOrder"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = [name for names in _EXPORTS.values() for name in names]


def __getattr__(name: str):
    if name == "PackedTokenDataset":  # a torch IterableDataset: importing it imports torch
        from .token_dataset import PackedTokenDataset
        return PackedTokenDataset
    if name in _EXPORTS:  # a submodule, as `luminamoon.data.batch` after an eager import
        return importlib.import_module(f".{name}", __name__)
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'luminamoon.data' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_EXPORTS))
