"""The FusedPipeline: reader -> clean -> quality -> exact dedup -> MinHash -> PII -> writer.

Thin front end over the C++ FusedPipeline (src/data/pipeline). Parquet input
and Parquet/Arrow IPC output come from the separate extension
``luminamoon._data_io`` (Arrow C++ of the pyarrow wheel); without it the
pipeline still reads JSONL/TXT and writes NDJSON. Every native call releases
the GIL.
"""
from __future__ import annotations

import glob
import json
import os
import threading
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterator, Optional
from urllib.parse import unquote, urlparse

__all__ = [
    "FusedPipeline",
    "PipelineConfig",
    "StreamBatch",
    "DataError",
    "EXIT_CODES",
    "resolve_inputs",
    "did_you_mean",
    "damerau_levenshtein",
    "arrow_io_available",
    "available_stages",
    "OUTPUT_FORMATS",
    "EXECUTORS",
    "INPUT_EXTENSIONS",
]

#: Exit codes of ``luminamoon data`` (DataError.exit_code).
EXIT_CODES = {
    0: "success",
    1: "unexpected internal error",
    2: "usage: unknown or misspelled option, format, scheme or config key",
    3: "input: an input cannot be found, opened or decoded (or, with --strict, a record was rejected)",
    4: "state corrupt: both checkpoint slots invalid, WAL or commit record missing",
    5: "input changed: inputs or config differ from the checkpointed run",
    6: "output: the output cannot be written",
    7: "unavailable: the feature is not built in (e.g. Parquet without Arrow C++)",
    130: "interrupted (Ctrl-C); the last checkpoint stays valid, rerun to resume",
}

EXECUTORS = ("local", "ray")
OUTPUT_FORMATS = ("parquet", "arrow", "arrow_stream", "ndjson")
INPUT_EXTENSIONS = (".jsonl", ".ndjson", ".json", ".txt", ".text", ".parquet")
_COMPRESSIONS = (".gz", ".zst", ".zstd")
LOCAL_SCHEMES = ("file",)
REMOTE_SCHEMES = ("s3", "gs", "gcs", "hf", "http", "https", "az", "abfs", "hdfs")


class DataError(RuntimeError):
    """A data-engine error; exit_code is what ``luminamoon data`` exits with."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def __reduce__(self):  # keeps exit_code across pickling (a Ray task's error reaches the driver)
        return (type(self), (str(self), self.exit_code))


# ---------------------------------------------------------------- did you mean
def damerau_levenshtein(a: str, b: str) -> int:
    """Edit distance with adjacent transpositions (optimal string alignment)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


def did_you_mean(word: str, known: Any, max_distance: Optional[int] = None) -> Optional[str]:
    """The closest known name within max_distance (default: a third of the word, at least 2)."""
    known = list(known)
    if not known:
        return None
    limit = max_distance if max_distance is not None else max(2, len(word) // 3)
    best = min(known, key=lambda k: (damerau_levenshtein(word.lower(), k.lower()), k))
    return best if damerau_levenshtein(word.lower(), best.lower()) <= limit else None


def _suggestion(word: str, known: Any) -> str:
    guess = did_you_mean(word, known)
    return f"; did you mean '{guess}'?" if guess else ""


# ---------------------------------------------------------------- inputs
def _display(path: str) -> str:
    """A path for messages: file names that are not UTF-8 (surrogate-escaped
    by Python) are shown with U+FFFD instead of failing to print."""
    try:
        return os.fsencode(path).decode("utf-8", "replace")
    except UnicodeError:
        return path.encode("utf-8", "replace").decode("utf-8")


def _supported(path: str) -> bool:
    name = path.lower()
    for c in _COMPRESSIONS:
        if name.endswith(c):
            name = name[: -len(c)]
            break
    return name.endswith(INPUT_EXTENSIONS)


def resolve_inputs(inputs: Any) -> list[str]:
    """Expands paths, directories (recursively, sorted), globs and file:// URIs
    into the shard list, in a stable order. Remote schemes are named as not
    supported; unknown schemes get a did-you-mean."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    shards: list[str] = []
    for item in inputs:
        text = os.fspath(item)
        if "://" in text:
            scheme = text.split("://", 1)[0].lower()
            if scheme in REMOTE_SCHEMES:
                raise DataError(
                    f"{scheme}:// inputs are not supported yet (remote storage); "
                    f"copy the shards to a local path or use file://", 2)
            if scheme not in LOCAL_SCHEMES:
                raise DataError(f"unknown URI scheme '{scheme}://' in {text}"
                                + _suggestion(scheme, LOCAL_SCHEMES + REMOTE_SCHEMES).replace("'?", "://'?"), 2)
            parsed = urlparse(text)
            if parsed.netloc not in ("", "localhost"):
                raise DataError(f"file:// URI with a host is not a local path: {text}", 2)
            text = unquote(parsed.path)
        if any(ch in text for ch in "*?["):
            matches = sorted(glob.glob(text, recursive=True))
            files = [m for m in matches if os.path.isfile(m) and _supported(m)]
            if not files:
                raise DataError(f"no input shard matches {text}", 3)
            shards.extend(os.path.abspath(m) for m in files)
        elif os.path.isdir(text):
            files = []
            for root, dirs, names in os.walk(text):
                dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
                files.extend(os.path.join(root, n) for n in sorted(names)
                             if not n.startswith((".", "_")) and _supported(n))
            if not files:
                raise DataError(f"directory {text} holds no input shard "
                                f"({', '.join(INPUT_EXTENSIONS)}, optionally .gz/.zst)", 3)
            shards.extend(os.path.abspath(f) for f in sorted(files))
        elif os.path.isfile(text):
            if not _supported(text):
                ext = "".join(Path(text).suffixes) or Path(text).name
                known = INPUT_EXTENSIONS + tuple(e + c for e in INPUT_EXTENSIONS[:5] for c in _COMPRESSIONS[:2])
                raise DataError(f"unsupported input format '{ext}' ({text})" + _suggestion(ext, known), 2)
            shards.append(os.path.abspath(text))
        elif os.path.exists(text):
            # A FIFO or device can be read once, but a checkpoint needs to
            # fingerprint a shard and re-read it from an offset on resume.
            import stat
            mode = os.stat(text).st_mode
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
                    else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
                    else "not a regular file")
            raise DataError(f"input {_display(text)} is {kind}: inputs must be regular files "
                            "(a checkpoint re-reads them on resume); copy the stream to a file first", 3)
        else:
            raise DataError(f"input not found: {_display(text)}", 3)
    return shards


# ---------------------------------------------------------------- config
# Config file sections and keys -> the flat keys of the native config.
_SECTIONS: dict[str, dict[str, str]] = {
    "reader": {"text_field": "text_field", "id_field": "id_field", "txt_mode": "txt_mode",
               "batch_docs": "batch_docs", "batch_bytes": "batch_bytes",
               "max_record_bytes": "max_record_bytes"},
    "clean": {"enabled": "clean", "invalid_utf8": "invalid_utf8"},
    "quality": {"enabled": "quality", "thresholds": "quality_thresholds"},
    "dedup": {"enabled": "dedup", "normalized": "dedup_normalized"},
    "minhash": {"enabled": "minhash", "num_perm": "minhash_num_perm", "ngram": "minhash_ngram",
                "bands": "minhash_bands", "rows": "minhash_rows", "threshold": "minhash_threshold",
                "seed": "minhash_seed", "scheme": "minhash_scheme"},
    "pii": {"enabled": "pii", "types": "pii_types", "keep_private_ip": "pii_keep_private_ip"},
    "output": {"format": "format", "compression": "compression", "compression_level": "compression_level",
               "row_group_rows": "row_group_rows", "part_rows": "part_rows", "part_bytes": "part_bytes",
               "write_dropped": "write_dropped", "write_metrics": "write_metrics"},
    "runtime": {"num_threads": "num_threads", "max_batches_in_flight": "max_batches_in_flight",
                "strict": "strict"},
    "tokenize": {"tokenizer": "tokenizer", "eos_token": "eos_token", "shard_tokens": "token_shard_tokens"},
}
# Keys the Python front end handles itself (the tokenization stage), not the C++ pipeline.
_FRONT_END_KEYS = ("tokenizer", "eos_token", "token_shard_tokens")


@dataclass
class PipelineConfig:
    """Every setting of the FusedPipeline, each stage optional. Build it
    directly, from a dict of sections (as in a TOML/YAML file) or a file."""

    text_field: str = "text"
    id_field: str = "id"
    txt_mode: str = "file"
    batch_docs: int = 2048
    batch_bytes: int = 1 << 20  # include/luminamoon/reader.h says why 1 MiB
    #: a longer record (line, txt document or paragraph, Parquet text) is a
    #: counted rejection; memory stays bounded by about this size
    max_record_bytes: int = 64 << 20
    clean: bool = True
    invalid_utf8: str = "replace"
    quality: bool = True
    quality_thresholds: dict = field(default_factory=dict)
    dedup: bool = True
    dedup_normalized: bool = False
    minhash: bool = True
    minhash_num_perm: int = 64
    minhash_ngram: int = 5
    minhash_bands: int = 8
    minhash_rows: int = 8
    minhash_threshold: float = 0.8
    minhash_seed: int = 1
    minhash_scheme: str = "oph"
    pii: bool = True
    pii_types: list = field(default_factory=list)
    pii_keep_private_ip: bool = False
    format: str = "parquet"
    compression: str = "zstd"
    compression_level: int = 1  # Arrow's default for zstd (include/luminamoon/writer.h)
    row_group_rows: int = 65536
    part_rows: int = 100000
    part_bytes: int = 256 << 20
    write_dropped: bool = False
    write_metrics: bool = False
    num_threads: int = 0
    max_batches_in_flight: int = 0
    #: a rejected record fails the run (DataError, exit 3) instead of being counted
    strict: bool = False
    #: a Hugging Face tokenizer.json: run() then tokenizes the kept documents into
    #: OUTPUT_DIR/tokens (token shards + Megatron .bin/.idx; luminamoon.data.tokenization)
    tokenizer: str = ""
    eos_token: str = "<|endoftext|>"
    token_shard_tokens: int = 64 << 20

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_dict(cls, data: dict, source: str = "config") -> "PipelineConfig":
        """Accepts sections ({"output": {"format": ...}}) and/or flat keys."""
        flat: dict[str, Any] = {}
        for key, value in data.items():
            if key in _SECTIONS and isinstance(value, dict):
                for sub, v in value.items():
                    if sub not in _SECTIONS[key]:
                        raise DataError(f"{source}: unknown key '{key}.{sub}'"
                                        + _suggestion(sub, _SECTIONS[key]), 2)
                    flat[_SECTIONS[key][sub]] = v
            elif key in cls.keys():
                flat[key] = value
            else:
                raise DataError(f"{source}: unknown key '{key}'"
                                + _suggestion(key, list(_SECTIONS) + cls.keys()), 2)
        config = cls()
        for key, value in flat.items():
            setattr(config, key, value)
        config.validate()
        return config

    @classmethod
    def from_file(cls, path: str) -> "PipelineConfig":
        """A TOML (.toml) or YAML (.yaml/.yml, needs PyYAML) config file."""
        p = Path(path)
        if not p.is_file():
            raise DataError(f"config file not found: {path}", 3)
        suffix = p.suffix.lower()
        try:
            if suffix == ".toml":
                try:
                    import tomllib
                except ModuleNotFoundError:  # Python 3.10
                    import tomli as tomllib  # type: ignore[no-redef]
                data = tomllib.loads(p.read_text(encoding="utf-8"))
            elif suffix in (".yaml", ".yml"):
                try:
                    import yaml
                except ModuleNotFoundError:
                    raise DataError("YAML config files need PyYAML (pip install pyyaml); "
                                    "TOML works without it", 7) from None
                data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
            else:
                raise DataError(f"config file must be .toml, .yaml or .yml: {path}"
                                + _suggestion(suffix, (".toml", ".yaml", ".yml")), 2)
        except DataError:
            raise
        except Exception as e:  # a syntax error in the file
            raise DataError(f"cannot parse {path}: {e}", 2) from None
        if not isinstance(data, dict):
            raise DataError(f"{path}: the top level must be a table", 2)
        return cls.from_dict(data, source=str(path))

    def validate(self) -> None:
        if self.format not in OUTPUT_FORMATS:
            raise DataError(f"unknown output format '{self.format}'"
                            + _suggestion(self.format, OUTPUT_FORMATS)
                            + f" (known: {', '.join(OUTPUT_FORMATS)})", 2)
        if self.txt_mode not in ("file", "line", "paragraph"):
            raise DataError(f"unknown txt_mode '{self.txt_mode}'"
                            + _suggestion(self.txt_mode, ("file", "line", "paragraph")), 2)
        if self.invalid_utf8 not in ("replace", "drop", "error"):
            raise DataError(f"unknown invalid_utf8 policy '{self.invalid_utf8}'"
                            + _suggestion(self.invalid_utf8, ("replace", "drop", "error")), 2)

    def to_native(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _FRONT_END_KEYS}
        d["quality_thresholds"] = dict(self.quality_thresholds)
        d["pii_types"] = list(self.pii_types)
        d["minhash_threshold"] = float(self.minhash_threshold)
        return d


# ---------------------------------------------------------------- backend
_backend_lock = threading.Lock()
_backend_module: Any = None


def _import_data_io():
    """The extension finds pyarrow's libarrow/libparquet through its RPATH, so
    pyarrow's Python module (and the numpy it imports: 55 ms of each CLI
    start) is imported only where that fails: loaded first, its libraries
    are then found by SONAME."""
    try:
        from .. import _data_io  # type: ignore[attr-defined]
    except ImportError:
        import pyarrow  # noqa: F401
        from .. import _data_io  # type: ignore[attr-defined]
    return _data_io


def _backend():
    """luminamoon._data_io (with Arrow) when pyarrow and the extension load, else _native."""
    global _backend_module
    with _backend_lock:
        if _backend_module is None:
            try:
                _backend_module = _import_data_io()
            except ImportError:
                from .. import _native
                if not hasattr(_native, "_FusedPipeline"):
                    raise DataError("this build of luminamoon has no data pipeline "
                                    "(built without oneTBB/simdjson/zlib/zstd)", 7) from None
                _backend_module = _native
        return _backend_module


def arrow_io_available() -> bool:
    """True when Parquet input and Parquet/Arrow IPC output are available."""
    try:
        return bool(_backend().pipeline_arrow_output_available())
    except DataError:
        return False


def available_stages() -> list[str]:
    return list(_backend().pipeline_available_stages())


# ---------------------------------------------------------------- pipeline
@dataclass
class StreamBatch:
    """The kept documents of one input batch, in stream order."""

    text: Any            # luminamoon.data.StringTensor
    ids: list
    metadata_json: list  # one JSON object text per document ("" when none)
    shard: str
    documents_in: int    # documents the batch held before the stages dropped some

    def metadata(self) -> list[dict]:
        return [json.loads(m) if m else {} for m in self.metadata_json]

    def __len__(self) -> int:
        return len(self.ids)


def _to_tensor(data, offsets):
    from .batch import StringTensor
    try:
        import pyarrow as pa
        n = len(offsets) - 1
        arr = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))
        return StringTensor(arr)
    except ImportError:
        raw = bytes(data)
        return StringTensor([raw[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)])


class FusedPipeline:
    """reader -> TextCleaner -> QualityFilter -> exact dedup -> MinHash LSH ->
    PIIMasker -> writer, every stage optional (see PipelineConfig).

    ``run(inputs, output_dir, resume=True)`` writes part files, checkpoints
    after each part and returns the summary; ``stream(inputs)`` yields
    StreamBatch objects for a training loop. Both release the GIL."""

    def __init__(self, config: Any = None, **overrides: Any) -> None:
        if config is None:
            config = PipelineConfig()
        elif isinstance(config, dict):
            config = PipelineConfig.from_dict(config)
        elif isinstance(config, (str, os.PathLike)):
            config = PipelineConfig.from_file(os.fspath(config))
        elif not isinstance(config, PipelineConfig):
            raise TypeError(f"config must be a PipelineConfig, dict or path, not {type(config).__name__}")
        if overrides:
            merged = {k: getattr(config, k) for k in PipelineConfig.keys()}
            for k, v in overrides.items():
                if k not in merged:
                    raise DataError(f"unknown setting '{k}'" + _suggestion(k, merged), 2)
                merged[k] = v
            config = PipelineConfig.from_dict(merged)
        config.validate()
        self.config = config
        self._native = None

    def _make(self):
        return _backend()._FusedPipeline(self.config.to_native())

    def run(self, inputs: Any, output_dir: Any, resume: bool = True, executor: str = "local",
            address: Optional[str] = None, workers: Optional[int] = None, progress: Any = None) -> dict:
        """executor "ray" runs on Ray (ray_executor.py) with the same result:
        address None starts a local instance with `workers` CPUs, else joins
        that cluster; progress (a callable taking a line) hears of each stage."""
        if executor == "ray":
            from .ray_executor import run_on_ray
            summary = run_on_ray(self.config, inputs, output_dir, resume, address, workers, progress)
        elif executor == "local":
            shards = resolve_inputs(inputs)
            self._native = self._make()
            summary = json.loads(self._native.run(shards, os.fspath(output_dir), bool(resume)))
        else:
            raise DataError(f"unknown executor '{executor}'" + _suggestion(executor, EXECUTORS)
                            + f" (known: {', '.join(EXECUTORS)})", 2)
        # The tokenization stage reads the committed parts, whichever executor wrote them.
        if self.config.tokenizer and summary.get("complete", True):
            from .tokenization import committed_part_files, tokenize_corpus
            parts = committed_part_files(output_dir)
            if not parts:
                raise DataError("tokenizing needs parquet or ndjson output parts, found none in "
                                f"{os.fspath(output_dir)}", 2)
            summary["tokenize"] = tokenize_corpus(
                parts, os.path.join(os.fspath(output_dir), "tokens"), self.config.tokenizer,
                eos_token=self.config.eos_token, text_field=self.config.text_field,
                shard_max_tokens=self.config.token_shard_tokens, resume=resume)
        return summary

    def progress(self) -> dict:
        """Live counters of the current or last run (documents, bytes, parts)."""
        return self._native.progress() if self._native is not None else {}

    def cancel(self) -> None:
        if self._native is not None:
            self._native.cancel()

    def stream(self, inputs: Any) -> Iterator[StreamBatch]:
        shards = resolve_inputs(inputs)
        stream = _backend()._BatchStream(self.config.to_native(), shards)
        try:
            while True:
                b = stream.next()
                if b is None:
                    return
                yield StreamBatch(_to_tensor(b["text_data"], b["text_offsets"]), b["ids"],
                                  b["metadata"], b["shard"], b["documents_in"])
        finally:
            stream.close()
