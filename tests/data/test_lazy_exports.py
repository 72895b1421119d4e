"""luminamoon.data's names are imported from their submodules on first use
(Note [lazy exports] in luminamoon/data/__init__.py): the table must list
exactly each submodule's __all__, every name must resolve to the submodule's
own object, and the CLI's start must not import numpy or the optimizer."""
from __future__ import annotations

import importlib
import subprocess
import sys

import luminamoon.data as data


def test_the_export_table_is_each_submodules_all():
    for module, names in data._EXPORTS.items():
        sub = importlib.import_module(f"luminamoon.data.{module}")
        assert sorted(names) == sorted(sub.__all__), module
        for name in names:
            assert getattr(data, name) is getattr(sub, name), name


def test_star_import_and_unknown_names():
    namespace: dict = {}
    exec("from luminamoon.data import *", namespace)
    assert "FusedPipeline" in namespace and "StringTensor" in namespace and "MinHashLSH" in namespace
    assert data.batch.StringTensor is data.StringTensor  # submodules stay attributes
    assert "TokenLoader" in dir(data)
    try:
        data.NoSuchThing  # noqa: B018
    except AttributeError as e:
        assert "NoSuchThing" in str(e)
    else:
        raise AssertionError("an unknown name must raise AttributeError")


def test_the_data_command_starts_without_numpy_or_the_optimizer():
    code = ("import sys, luminamoon.data.cli\n"
            "print(sorted(m for m in ('numpy', 'luminamoon._native', 'luminamoon.data.batch') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout
