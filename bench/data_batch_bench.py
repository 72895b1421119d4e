"""Benchmark of the batch stages (issue 6): TextCleaner alone, clean + quality + PII, per core,
on a generated corpus, against the memory floor and side by side with datatrove's
GopherQualityFilter, GopherRepetitionFilter and PIIFormatter on the same documents.

    .venvs/databatch/bin/python bench/data_batch_bench.py --mb 100 --repeats 5 --anchor-docs 2000

datatrove is a benchmark-only dependency (pip install datatrove spacy regex into the
benchmark environment); without it the anchor rows are skipped.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from luminamoon import data

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import machine, measure  # noqa: E402

WORDS = ("the of and to in is that with for have be on as it was by this are from at an or which one all "
         "river model data system people water history music garden winter language market science city "
         "quickly bright simple ancient careful open small large green north written number between "
         "government research information development university community following experience").split()
EXTRAS = ["café", "naïve", "Straße", "données", "東京", "—", "“quoted”", "(see", "note)", "2024", "#1", "e.g."]
PII = ["john.doe@example.com", "8.8.8.8", "(415) 555-2671", "4111 1111 1111 1111", "123-45-6789",
       "DE89 3704 0044 0532 0130 00", "AKIAIOSFODNN7EXAMPLE", "+44 20 7946 0958"]


def make_corpus(target_bytes: int, seed: int = 6) -> list[bytes]:
    """Natural-looking documents of 0.5-8 KB: paragraphs of sentences, a few PII
    values, some CRLF line ends, trailing spaces and stray control characters."""
    rng = np.random.default_rng(seed)
    sentences = []
    for _ in range(4000):
        n = int(rng.integers(5, 25))
        ws = [WORDS[i] for i in rng.integers(0, len(WORDS), n)]
        for k in np.nonzero(rng.random(n) < 0.04)[0]:
            ws[k] = EXTRAS[int(rng.integers(0, len(EXTRAS)))]
        if rng.random() < 0.05:
            ws[int(rng.integers(0, n))] = PII[int(rng.integers(0, len(PII)))]
        ws[0] = ws[0].capitalize()
        sentences.append(" ".join(ws) + str(rng.choice([".", ".", ".", "?", "!", "..."])))
    docs, total = [], 0
    while total < target_bytes:
        paras = []
        for _ in range(int(rng.integers(1, 8))):
            idx = rng.integers(0, len(sentences), int(rng.integers(1, 7)))
            paras.append(" ".join(sentences[i] for i in idx))
        sep = "\r\n\r\n" if rng.random() < 0.1 else "\n\n"
        text = sep.join(paras)
        if rng.random() < 0.1:
            text = text.replace(". ", ".  \n", 3) + " \x07 "
        b = text.encode()
        docs.append(b)
        total += len(b)
    return docs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--anchor-docs", type=int, default=2000, help="documents for the datatrove side-by-side")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--dump", help="write the corpus to DUMP.bytes / DUMP.offsets (for data_batch_scaling.cc) and stop")
    args = ap.parse_args()

    load_start = os.getloadavg()[0]
    docs = make_corpus(int(args.mb * 1e6))
    nbytes = sum(map(len, docs))
    tensor = data.StringTensor(docs)
    mb = nbytes / 1e6
    rows = []
    if args.dump:
        flat, offsets = tensor.to_numpy()
        flat.tofile(args.dump + ".bytes")
        offsets.tofile(args.dump + ".offsets")
        print(f"wrote {args.dump}.bytes / .offsets ({len(docs)} documents, {mb:.1f} MB)")
        return

    def row(name, t, nbytes_=nbytes, ndocs=len(docs)):
        rows.append({"case": name, "wall_s": t.wall_s, "cpu_s": t.cpu_s, "MB/s (cpu)": nbytes_ / 1e6 / t.cpu_s,
                     "MB/s (wall)": nbytes_ / 1e6 / t.wall_s, "docs/s (cpu)": ndocs / t.cpu_s})

    print(f"corpus: {len(docs)} documents, {mb:.1f} MB")
    data.set_num_threads(1)  # per core
    src, _ = tensor.to_numpy()
    dst = np.empty_like(src)
    t = measure(lambda: np.copyto(dst, src), args.repeats, warmup=0)
    row("memory floor: copy of the corpus (numpy copyto)", t)
    t = measure(lambda: data.clean_batch(tensor), args.repeats, warmup=0)
    cleaned = t.result
    row("TextCleaner (clean_batch), 1 thread", t)
    t = measure(lambda: data.filter_quality(cleaned), args.repeats, warmup=0)
    row("QualityFilter (filter_quality), 1 thread", t)
    t = measure(lambda: data.mask_pii(cleaned), args.repeats, warmup=0)
    row("PIIMasker (mask_pii), 1 thread", t)

    def chain():
        cl = data.clean_batch(tensor)
        q = data.filter_quality(cl)
        return data.mask_pii(cl)
    t = measure(chain, args.repeats, warmup=0)
    row("clean + quality + PII, 1 thread", t)
    data.set_num_threads(0)
    t = measure(chain, args.repeats, warmup=0)
    row(f"clean + quality + PII, {data.get_num_threads()} threads", t)

    # Side by side with datatrove on the same documents (one thread each).
    anchor = docs[: args.anchor_docs]
    abytes = sum(map(len, anchor))
    try:
        from datatrove.data import Document
        from datatrove.pipeline.filters import GopherQualityFilter, GopherRepetitionFilter
        from datatrove.pipeline.formatters import PIIFormatter
    except ImportError as e:  # benchmark-only dependency
        print(f"datatrove not installed ({e}); anchor skipped")
    else:
        texts = [d.decode() for d in anchor]
        gq, gr, pii = GopherQualityFilter(), GopherRepetitionFilter(), PIIFormatter()

        def datatrove_run():
            for i, t in enumerate(texts):
                doc = Document(text=t, id=str(i))
                gr.filter(doc)
                gq.filter(doc)
                pii.format(t)
        gq.filter(Document(text=texts[0], id="warm"))  # load the tokenizer outside the timing
        t = measure(datatrove_run, max(1, args.repeats // 2), warmup=0)
        row("datatrove: GopherRepetition + GopherQuality + PIIFormatter (anchor)", t, abytes, len(anchor))
        data.set_num_threads(1)
        sub = data.StringTensor(anchor)

        def ours():
            q = data.filter_quality(sub)
            return data.mask_pii(sub)
        t = measure(ours, args.repeats, warmup=0)
        row("luminamoon: filter_quality + mask_pii, same documents, 1 thread", t, abytes, len(anchor))
        data.set_num_threads(0)

    print(f"machine: {machine()}; load average {load_start:.2f} at the start")
    print("| case | MB/s (CPU) | MB/s (wall) | docs/s (CPU) |\n| --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['case']} | {r['MB/s (cpu)']:.3g} | {r['MB/s (wall)']:.3g} | {r['docs/s (cpu)']:.3g} |")
    anchor_rows = [r for r in rows if "anchor" in r["case"] or "same documents" in r["case"]]
    if len(anchor_rows) == 2:
        print(f"ratio (docs/s, CPU): {anchor_rows[1]['docs/s (cpu)'] / anchor_rows[0]['docs/s (cpu)']:.1f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"docs": len(docs), "bytes": nbytes, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
