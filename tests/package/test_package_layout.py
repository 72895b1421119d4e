"""The package's layout: areas import without torch, no import cycle, the moved names still work.

The cycle check reads the package's module-level imports with `ast` (the
imports a module runs when it is loaded, not the lazy ones inside functions),
so it is independent of the order in which a test happens to import things.
"""
from __future__ import annotations

import ast
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import luminamoon

PACKAGE_DIR = Path(luminamoon.__file__).resolve().parent


def _run_without_torch(code: str) -> subprocess.CompletedProcess:
    # A finder that refuses torch: the code fails if anything it runs imports torch.
    guard = ("import sys\n"
             "class NoTorch:\n"
             "    def find_spec(self, name, path=None, target=None):\n"
             "        if name == 'torch' or name.startswith('torch.'):\n"
             "            raise ImportError('torch was imported: ' + name)\n"
             "sys.meta_path.insert(0, NoTorch())\n")
    return subprocess.run([sys.executable, "-c", guard + code], capture_output=True, text=True, timeout=120)


def test_numpy_users_never_import_torch():
    code = ("import numpy as np\n"
            "import luminamoon, luminamoon.optim as optim, luminamoon.data as data\n"
            "from luminamoon import info\n"
            "p = np.ones(64, np.float32); g = np.full(64, 0.5, np.float32)\n"
            "m = np.zeros(64, np.float32); v = np.zeros(64, np.float32)\n"
            "optim.step(p, g, m, v, lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, step=1)\n"
            "assert abs(float(p[0]) - 0.9) < 1e-4, p[0]\n"   # Adam's first step moves by lr
            "out = data.clean_batch(['a  b\\x00c'])\n"
            "assert 'torch' not in sys.modules\n"
            "print('ok')\n")
    result = _run_without_torch(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _load_time_imports(path: Path, module: str, known: set[str]) -> set[str]:
    """The package modules that `module` imports at load time (top-level statements only)."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in tree.body:  # function bodies are lazy imports: not followed
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in found if name in known and name != module}


def test_no_import_cycle():
    paths = {_module_name(p): p for p in PACKAGE_DIR.rglob("*.py")}
    known = set(paths)
    graph = {m: _load_time_imports(p, m, known) for m, p in paths.items()}
    assert graph["luminamoon.optim.torch_optimizer"] >= {"luminamoon.optim.functional"}

    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                pytest.fail("import cycle: " + " -> ".join(path + [m, n]))
            if n not in state:
                visit(n, path + [m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


@pytest.mark.parametrize("old, new, name", [
    ("luminamoon.optim_torch", "luminamoon.optim.torch_optimizer", "LuminaV"),
    ("luminamoon.data_batch", "luminamoon.data.batch", "clean_batch"),
    ("luminamoon.data_dedup", "luminamoon.data.dedup", "MinHashLSH"),
    ("luminamoon.data_pipeline", "luminamoon.data.pipeline", "FusedPipeline"),
    ("luminamoon.data_cli", "luminamoon.data.cli", "main"),
])
def test_moved_modules_still_import_with_a_warning(old, new, name):
    if old == "luminamoon.optim_torch":
        pytest.importorskip("torch")
    code = (f"import warnings, importlib\n"
            f"with warnings.catch_warnings(record=True) as w:\n"
            f"    warnings.simplefilter('always')\n"
            f"    old = importlib.import_module({old!r})\n"
            f"new = importlib.import_module({new!r})\n"
            f"assert old.{name} is new.{name}\n"
            f"msgs = [str(x.message) for x in w if issubclass(x.category, DeprecationWarning)]\n"
            f"assert any({old!r} in m and {new!r} in m for m in msgs), msgs\n"
            f"print('ok')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_public_names_where_the_readme_shows_them():
    torch = pytest.importorskip("torch")
    from luminamoon import data
    from luminamoon.optim import LuminaV, NonFiniteGradientError, step

    assert issubclass(LuminaV, torch.optim.Optimizer)
    assert issubclass(NonFiniteGradientError, ArithmeticError)
    assert callable(step)
    for name in ("StringTensor", "clean_batch", "filter_quality", "mask_pii", "StreamDeduplicator",
                 "MinHashLSH", "FusedPipeline", "PipelineConfig"):
        assert hasattr(data, name), name
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new paths themselves never warn
        import luminamoon.data.pipeline  # noqa: F401
        import luminamoon.optim.torch_optimizer  # noqa: F401
