"""The `luminamoon` command: info, demo and data."""
from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:3] == ["data", "run"]:  # the program, not a caller's main([...])
        from ._allocator import run_under_jemalloc
        run_under_jemalloc()  # Note [the CLI's allocator]; returns where it does not apply
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="luminamoon", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="CPU features, backends and versions")
    demo = sub.add_parser("demo", help="train a small model with LuminaV and AdamW")
    demo.add_argument("--steps", type=int, default=None)
    demo.add_argument("--seed", type=int, default=0)
    sub.add_parser("data", help="run the data engine (see `luminamoon data --help`)", add_help=False)
    if argv and argv[0] == "data":
        # The data engine does no linear algebra, but where a command imports
        # numpy (the Ray executor, tokenization) OpenBLAS starts its threads,
        # and each spins about 0.1 CPU-second waiting for work that never
        # comes (0.17 against 0.07 CPU-s for the import alone on 2 cores). A
        # user's own setting wins.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        from .data.cli import main as data_main
        return data_main(argv[1:])
    args = parser.parse_args(argv)
    if args.command == "info":
        from .info import main as info_main
        return info_main()
    if args.command == "demo":
        from .demo import main as demo_main
        return demo_main(steps=args.steps, seed=args.seed)
    return 2


if __name__ == "__main__":
    sys.exit(main())
