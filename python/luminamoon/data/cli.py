"""`luminamoon data`: run the data engine's FusedPipeline from the command line.

    luminamoon data run INPUT... -o OUTPUT_DIR [--config FILE] [--format parquet|arrow|arrow_stream|ndjson]
                        [--resume/--no-resume] [--dedup/--no-dedup] ...
                        [--executor local|ray [--address ADDRESS] [--workers N]]   (docs/ray.md)
    luminamoon data demo [-o DIR]        the pipeline over the small corpus shipped with the package
    luminamoon data generate DIR         a synthetic corpus (planted duplicates, PII, junk)

Output: OUTPUT_DIR/part-NNNNNNNN.<ext> (kept documents, names sort in stream
order), dropped/ and metrics/ (with --write-dropped / --write-metrics),
summary.json, and _state/ (checkpoint.meta, WAL, LSH index, commit records).
A killed run resumes from its last checkpoint with the same command.

Config file (TOML, or YAML with PyYAML), every key optional:
    [reader]   text_field = "text"  id_field = "id"  txt_mode = "file"  batch_docs = 2048
               max_record_bytes = 67108864
    [clean]    enabled = true  invalid_utf8 = "replace"
    [quality]  enabled = true
    [quality.thresholds]  min_words = 50  min_entropy = 3.0  max_dup_line_frac = 0.3  # null disables
    [dedup]    enabled = true  normalized = false
    [minhash]  enabled = true  num_perm = 64  ngram = 5  bands = 8  rows = 8  threshold = 0.8  scheme = "oph"
    [pii]      enabled = true  types = ["email", "ip_address"]  keep_private_ip = false
    [output]   format = "parquet"  compression = "zstd"  compression_level = 1  part_rows = 100000
               part_bytes = 268435456
               write_dropped = false  write_metrics = false
    [runtime]  num_threads = 0  max_batches_in_flight = 0  strict = false

A malformed record (or one over max_record_bytes) is counted, reported with
shard and line in summary.json, and skipped; --strict fails the run on it
instead. A shard that cannot be decoded to its end is printed and the run
exits 3 once everything readable is committed.

Exit codes: see EXIT_CODES in luminamoon.data.pipeline (0 ok, 2 usage, 3 input,
4 state corrupt, 5 input changed, 6 output, 7 unavailable, 130 interrupted).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
import tempfile
import threading
import time
from typing import Optional

from .._allocator import active_allocator, run_under_jemalloc
from .pipeline import (EXIT_CODES, OUTPUT_FORMATS, DataError, FusedPipeline, PipelineConfig,
                            _display, arrow_io_available, did_you_mean)

__all__ = ["main", "generate_corpus", "run_demo"]

_STAGES = ("clean", "quality", "dedup", "minhash", "pii")


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that reports through DataError(exit 2) with a did-you-mean."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"{self.prog}: {message}")


def _build_parser() -> _Parser:
    parser = _Parser(prog="luminamoon data", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    run = sub.add_parser("run", help="run the pipeline over INPUT... into OUTPUT_DIR")
    run.add_argument("inputs", nargs="+", metavar="INPUT",
                     help="files, directories, globs or file:// URIs (.jsonl/.ndjson[.gz|.zst], .txt, .parquet)")
    run.add_argument("-o", "--output", required=True, metavar="OUTPUT_DIR")
    run.add_argument("--config", metavar="FILE", help="TOML or YAML config (see docs)")
    run.add_argument("--format", metavar="FORMAT", help="parquet (default), arrow, arrow_stream or ndjson")
    run.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True,
                     help="continue from the checkpoint in OUTPUT_DIR (default) or start over")
    for stage in _STAGES:
        run.add_argument(f"--{stage}", action=argparse.BooleanOptionalAction, default=None,
                         help=f"enable or disable the {stage} stage")
    run.add_argument("--text-field", metavar="NAME")
    run.add_argument("--id-field", metavar="NAME")
    run.add_argument("--txt-mode", metavar="MODE", help="file, line or paragraph")
    run.add_argument("--part-rows", type=int, metavar="N")
    run.add_argument("--part-bytes", type=int, metavar="N")
    run.add_argument("--batch-docs", type=int, metavar="N")
    run.add_argument("--write-dropped", action="store_true", default=None)
    run.add_argument("--write-metrics", action="store_true", default=None)
    run.add_argument("--threads", type=int, metavar="N")
    run.add_argument("--max-batches-in-flight", type=int, metavar="N")
    run.add_argument("--max-record-bytes", type=int, metavar="N",
                     help="a longer record is a counted rejection (default 64 MiB)")
    run.add_argument("--strict", action="store_true", default=None,
                     help="fail the run (exit 3) on the first rejected record instead of counting it")
    run.add_argument("--progress", choices=("auto", "bar", "log", "none"), default="auto")
    run.add_argument("--tokenizer", metavar="PATH",
                     help="a Hugging Face tokenizer.json: tokenize the kept documents into OUTPUT_DIR/tokens "
                          "(token shards + Megatron .bin/.idx)")
    run.add_argument("--eos-token", metavar="TOKEN", help="end-of-document token (default <|endoftext|>)")
    run.add_argument("--executor", default="local", metavar="NAME",
                     help="local (default) or ray: the same result on a Ray cluster (docs/ray.md)")
    run.add_argument("--address", metavar="ADDRESS",
                     help="with --executor ray: join this Ray cluster (default: start a local instance)")
    run.add_argument("--workers", type=int, metavar="N",
                     help="with --executor ray: CPUs of the local instance and key-range partitions")
    demo = sub.add_parser("demo", help="run the pipeline over the small corpus shipped with the package")
    demo.add_argument("-o", "--output", metavar="DIR")
    gen = sub.add_parser("generate", help="write a synthetic JSONL corpus")
    gen.add_argument("output", metavar="DIR")
    gen.add_argument("--shards", type=int, default=4)
    gen.add_argument("--docs", type=int, default=1000, help="documents per shard")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--compress", choices=("none", "gz", "zst"), default="none")
    return parser


def _known_options(parser: argparse.ArgumentParser, command: Optional[str]) -> list[str]:
    target = parser
    if command:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction) and command in action.choices:
                target = action.choices[command]
    return [o for a in target._actions for o in a.option_strings]


def _check_options(parser: _Parser, argv: list[str]) -> None:
    """Unknown --options get a Damerau-Levenshtein suggestion before argparse sees them."""
    commands = ("run", "demo", "generate")
    command = argv[0] if argv and argv[0] in commands else None
    if argv and not argv[0].startswith("-") and command is None:
        guess = did_you_mean(argv[0], commands)
        raise _UsageError(f"unknown command '{argv[0]}'" + (f"; did you mean '{guess}'?" if guess else "")
                          + f" (commands: {', '.join(commands)})")
    known = _known_options(parser, command)
    for token in argv[1:] if command else argv:
        if token == "--":
            break
        if token.startswith("--"):
            name = token.split("=", 1)[0]
            if name not in known:
                guess = did_you_mean(name, [k for k in known if k.startswith("--")])
                raise _UsageError(f"unknown option '{name}'" + (f"; did you mean '{guess}'?" if guess else ""))


# ---------------------------------------------------------------- progress
def _human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n:.1f} TB"


def _progress_line(p: dict, elapsed: float, start: dict) -> str:
    docs = p.get("documents_in", 0)
    kept = p.get("documents_kept", 0)
    session_docs = docs - start.get("documents_in", 0)
    session_bytes = p.get("bytes_in", 0) - start.get("bytes_in", 0)
    rate_docs = session_docs / elapsed if elapsed > 0 else 0.0
    rate_mb = session_bytes / elapsed / 1e6 if elapsed > 0 else 0.0
    total = p.get("input_bytes_total", 0)
    done = min(p.get("input_bytes_done", 0), total) if total else 0
    frac = done / total if total else 0.0
    done_since = done - min(start.get("input_bytes_done", 0), total) if total else 0
    eta = ""
    if total and done_since > 0 and frac < 1:
        eta = f" ETA {int((total - done) / (done_since / elapsed))}s"
    kept_pct = 100.0 * kept / docs if docs else 0.0
    return (f"{frac * 100:5.1f}% {docs} docs {rate_docs:,.0f} docs/s {rate_mb:.1f} MB/s "
            f"kept {kept_pct:.1f}% parts {p.get('parts_committed', 0)}{eta}")


def _bar(frac: float, width: int = 24) -> str:
    filled = int(frac * width)
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _run_with_progress(pipeline: FusedPipeline, inputs, output: str, resume: bool, mode: str) -> dict:
    if mode == "auto":
        mode = "bar" if sys.stderr.isatty() else "log"
    result: dict = {}

    def work() -> None:
        try:
            result["summary"] = pipeline.run(inputs, output, resume=resume)
        except BaseException as e:  # handed to the main thread
            result["error"] = e

    thread = threading.Thread(target=work, name="luminamoon-pipeline", daemon=True)
    started = time.monotonic()
    thread.start()
    start_progress: dict = {}
    last_log = started
    try:
        while thread.is_alive():
            thread.join(0.2)
            p = pipeline.progress()
            if not p:
                continue
            if not start_progress and p.get("running"):
                start_progress = dict(p)
            now = time.monotonic()
            line = _progress_line(p, now - started, start_progress)
            if mode == "bar":
                total = p.get("input_bytes_total", 0)
                frac = min(p.get("input_bytes_done", 0) / total, 1.0) if total else 0.0
                sys.stderr.write("\r" + _bar(frac) + " " + line + "\033[K")
                sys.stderr.flush()
            elif mode == "log" and now - last_log >= 5.0:
                sys.stderr.write(f"luminamoon data: {line}\n")
                sys.stderr.flush()
                last_log = now
    except KeyboardInterrupt:
        pipeline.cancel()
        thread.join()
        if mode == "bar":
            sys.stderr.write("\n")
        raise
    if mode == "bar":
        sys.stderr.write("\n")
    if "error" in result:
        raise result["error"]
    return result["summary"]


def _print_summary(summary: dict, output: str) -> None:
    docs = summary.get("documents_in", 0)
    kept = summary.get("documents_kept", 0)
    run = summary.get("this_run", {})
    print(f"documents in {docs}, kept {kept} ({100.0 * kept / docs if docs else 0:.1f}%), "
          f"malformed records {summary.get('records_malformed', 0)}")
    for stage, reasons in summary.get("dropped", {}).items():
        for reason, n in reasons.items():
            print(f"  dropped by {stage:8s} {reason:28s} {n}")
    for name, n in summary.get("counters", {}).items():
        print(f"  {name:37s} {n}")
    if summary.get("stages_missing"):
        print(f"  stages not built in (skipped): {', '.join(summary['stages_missing'])}")
    print(f"bytes in {_human_bytes(summary.get('bytes_in', 0))}, out {_human_bytes(summary.get('bytes_out', 0))}"
          f" in {summary.get('parts', 0)} part(s); this run {run.get('seconds', 0):.2f}s, "
          f"{run.get('documents_per_second', 0):,.0f} docs/s, {run.get('mb_per_second', 0):.1f} MB/s"
          + (" (resumed)" if run.get("resumed") else ""))
    print(f"summary: {_display(os.path.join(output, 'summary.json'))}")
    print(f"memory allocator: {active_allocator()}")
    tok = summary.get("tokenize")
    if tok:
        print(f"tokenized {tok['documents']} documents into {tok['tokens']:,} tokens, {tok['shards']} shard(s) "
              f"in {_display(tok['output'])}" + (f"; Megatron {_display(tok['megatron_prefix'])}.bin/.idx"
                                                  if tok.get("megatron_prefix") else ""))
    for bad in summary.get("shards_damaged", []):
        print(f"warning: shard {bad['shard']} cannot be decoded past line {bad['line']} "
              f"({bad['message']}); the rest of it is lost", file=sys.stderr)


def _config_from_args(args) -> PipelineConfig:
    config = PipelineConfig.from_file(args.config) if args.config else PipelineConfig()
    overrides = {
        "format": args.format, "text_field": args.text_field, "id_field": args.id_field,
        "txt_mode": args.txt_mode, "part_rows": args.part_rows, "part_bytes": args.part_bytes,
        "batch_docs": args.batch_docs, "write_dropped": args.write_dropped,
        "write_metrics": args.write_metrics, "num_threads": args.threads,
        "max_batches_in_flight": args.max_batches_in_flight,
        "max_record_bytes": args.max_record_bytes, "strict": args.strict,
        "tokenizer": args.tokenizer, "eos_token": args.eos_token,
    }
    for stage in _STAGES:
        overrides[stage] = getattr(args, stage)
    for key, value in overrides.items():
        if value is not None:
            setattr(config, key, value)
    config.validate()
    if config.format != "ndjson" and not arrow_io_available():
        raise DataError(f"{config.format} output is unavailable: this build has no Arrow C++ "
                        "(luminamoon._data_io needs the pyarrow wheel's Arrow at build and run time); "
                        "use --format ndjson", 7)
    return config


# ---------------------------------------------------------------- corpus
_STOP = ["the", "be", "to", "of", "and", "that", "have", "with", "a", "in", "is", "it", "for", "on", "as"]
_SYLLABLES = ["ka", "lo", "mi", "ren", "tor", "sa", "vel", "un", "dar", "is", "po", "ne", "qui", "ber",
              "cla", "mon", "tes", "ri", "gan", "fo", "lu", "zen", "ta", "mor"]


def _vocabulary(rng: random.Random, n: int = 3000) -> list[str]:
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))))
    return sorted(words)


def _document(rng: random.Random, vocab: list[str]) -> str:
    paragraphs = []
    for _ in range(rng.randint(1, 4)):
        sentences = []
        for _ in range(rng.randint(3, 8)):
            words = []
            for _ in range(rng.randint(8, 20)):
                r = rng.random()
                words.append(rng.choice(_STOP) if r < 0.12 else
                             vocab[int(rng.paretovariate(1.0)) % len(vocab)] if r < 0.3 else rng.choice(vocab))
            sentences.append(" ".join(words).capitalize() + rng.choice([".", ".", ".", "!", "?"]))
        paragraphs.append(" ".join(sentences))
    return "\n\n".join(paragraphs)


def _pii(rng: random.Random) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        return f"write to {rng.choice(['ana', 'bo', 'chen'])}.{rng.randint(1, 999)}@example.org today"
    if kind == 1:
        return f"call +1 415 555 {rng.randint(1000, 9999)} now"
    if kind == 2:
        return f"server at 8.{rng.randint(1, 254)}.{rng.randint(1, 254)}.{rng.randint(1, 254)} is up"
    return "card 4111 1111 1111 1111 on file"


def generate_corpus(output_dir: str, shards: int = 4, docs_per_shard: int = 1000, seed: int = 0,
                    compress: str = "none") -> list[str]:
    """A deterministic JSONL corpus: English-like documents (Zipf words, stop
    words) with planted exact and near duplicates, PII, junk (short,
    repetitive, symbol spam, empty) and a few malformed lines. Returns the shard paths."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng)
    os.makedirs(output_dir, exist_ok=True)
    history: list[str] = []
    paths = []
    for s in range(shards):
        ext = {"none": ".jsonl", "gz": ".jsonl.gz", "zst": ".jsonl.zst"}[compress]
        path = os.path.join(output_dir, f"shard-{s:05d}{ext}")
        lines = []
        for d in range(docs_per_shard):
            r = rng.random()
            doc_id = f"s{s}-d{d}"
            if history and r < 0.05:
                text = rng.choice(history)                      # exact duplicate
            elif history and r < 0.08:
                words = rng.choice(history).split(" ")          # near duplicate
                for _ in range(max(1, len(words) // 50)):
                    words[rng.randrange(len(words))] = rng.choice(vocab)
                text = " ".join(words)
            elif r < 0.10:
                text = rng.choice(["short text", "### $$$ ### ... ### ...", "", "buy now " * 60,
                                   "line\n" * 80])              # junk
            elif r < 0.102:
                lines.append('{"id": "%s", "text": "unterminated' % doc_id)  # malformed
                continue
            else:
                text = _document(rng, vocab)
                if rng.random() < 0.15:
                    text += " " + _pii(rng) + "."
                if rng.random() < 0.05:
                    text = "  " + text.replace("\n", "\r\n") + " \t\n\n\n\n"  # for the cleaner
                history.append(text)
            lines.append(json.dumps({"id": doc_id, "text": text, "source": f"gen{s}",
                                     "n": d}, ensure_ascii=False))
        payload = ("\n".join(lines) + "\n").encode("utf-8")
        if compress == "gz":
            payload = gzip.compress(payload, mtime=0)
        elif compress == "zst":
            try:
                import pyarrow
                payload = pyarrow.compress(payload, codec="zstd", asbytes=True)
            except ImportError:
                raise DataError("--compress zst needs pyarrow", 7) from None
        with open(path, "wb") as f:
            f.write(payload)
        paths.append(path)
    return paths


def run_demo(output: Optional[str] = None) -> int:
    """The data half of `luminamoon demo`: the pipeline over the small corpus
    shipped in the package (demo_corpus/, made by `luminamoon data generate
    demo_corpus --shards 3 --docs 400 --seed 7 --compress gz`) with planted
    duplicates, PII and junk; prints the summary."""
    work = tempfile.mkdtemp(prefix="luminamoon-demo-")
    shipped = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demo_corpus")
    corpus = sorted(os.path.join(shipped, f) for f in os.listdir(shipped) if f.endswith(".jsonl.gz"))
    out = output or os.path.join(work, "out")
    fmt = "parquet" if arrow_io_available() else "ndjson"
    print(f"corpus: {len(corpus)} shards in {os.path.dirname(corpus[0])} "
          f"(planted duplicates, near duplicates, PII, junk, malformed lines)")
    pipeline = FusedPipeline(format=fmt, write_dropped=True, part_rows=500)
    summary = pipeline.run(corpus, out, resume=False)
    _print_summary(summary, out)
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _build_parser()
    try:
        if not argv:
            parser.print_help()
            return 2
        if argv[0] in ("-h", "--help"):
            parser.print_help()
            print("\nexit codes:\n" + "\n".join(f"  {k:3d}  {v}" for k, v in EXIT_CODES.items()))
            return 0
        _check_options(parser, argv)
        args = parser.parse_args(argv)
        if args.command == "generate":
            paths = generate_corpus(args.output, args.shards, args.docs, args.seed, args.compress)
            print(f"wrote {len(paths)} shards to {args.output}")
            return 0
        if args.command == "demo":
            return run_demo(args.output)
        config = _config_from_args(args)
        pipeline = FusedPipeline(config)
        if args.executor == "local" and (args.address or args.workers):
            raise DataError("--address and --workers need --executor ray", 2)
        if args.executor != "local":
            from .ray_executor import print_progress
            summary = pipeline.run(args.inputs, args.output, resume=args.resume, executor=args.executor,
                                   address=args.address, workers=args.workers,
                                   progress=None if args.progress == "none" else print_progress)
        else:
            summary = _run_with_progress(pipeline, args.inputs, args.output, args.resume, args.progress)
        _print_summary(summary, args.output)
        if not summary.get("complete", True):
            return 130
        if summary.get("shards_damaged"):
            # The run finished and committed what could be read, but input was lost.
            print(f"error: {len(summary['shards_damaged'])} shard(s) could not be decoded to the end "
                  "(see above and summary.json's shards_damaged)", file=sys.stderr)
            return 3
        return 0
    except _UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except DataError as e:
        print(f"error: {_display(str(e))}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("interrupted; the last checkpoint is kept: rerun the same command to resume", file=sys.stderr)
        return 130
    except Exception as e:  # a bug, not bad input: say so, keep the exit code distinct
        print(f"internal error ({type(e).__name__}): {e}; the last checkpoint is kept", file=sys.stderr)
        return 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["run"]:
        run_under_jemalloc()  # Note [the CLI's allocator]
    sys.exit(main())
