"""bench/optim_llama_quality.py's optimizer kinds build what their names say: the spec options a kind's
suffix names (cautious mask, lam) reach every param group, on top of the options of the kind it extends."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
quality = pytest.importorskip("optim_llama_quality")


@pytest.mark.parametrize("kind, expected", [
    ("luminav_tdclm", dict(mode="tdclm", td_factor="factored", tau=0.0, lam=0.0, cautious=False)),
    ("luminav_tdclm_cautious",
     dict(mode="tdclm", td_factor="factored", tau=0.0, lam=0.0, cautious=True, cautious_until=None)),
    ("luminav_tdclm_tau0.5_cautious", dict(mode="tdclm", td_factor="factored", tau=0.5, lam=0.0, cautious=True)),
    ("luminav_tdclm_tau0.5_lam0.1", dict(mode="tdclm", td_factor="factored", tau=0.5, lam=0.1, cautious=False)),
    ("luminav_clm_cautious", dict(mode="clm", tau=0.0, lam=0.0, cautious=True)),
    ("luminav_tdclm_cautious_b2_0.99",
     dict(mode="tdclm", td_factor="factored", tau=0.0, lam=0.0, cautious=True, betas=(0.9, 0.99))),
    ("luminav_tdclm_cautious_b2_0.999",
     dict(mode="tdclm", td_factor="factored", tau=0.0, lam=0.0, cautious=True, betas=(0.9, 0.999))),
    ("luminav_tdclm_tau0.5_cautious_until400",
     dict(mode="tdclm", td_factor="factored", tau=0.5, lam=0.0, cautious=True, cautious_until=400)),
    ("luminav_tdclm_tau0.5_cautious_until200",
     dict(mode="tdclm", td_factor="factored", tau=0.5, lam=0.0, cautious=True, cautious_until=200)),
    ("luminav_tdclm_cautious_until400",
     dict(mode="tdclm", td_factor="factored", tau=0.0, lam=0.0, cautious=True, cautious_until=400)),
])
def test_kind_options_reach_every_group(kind, expected):
    assert kind in quality.KINDS
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Linear(4, 3))
    opt = quality.make(kind, model, lr=1e-3)
    assert opt.param_groups
    expected = dict(expected)
    betas = expected.pop("betas", (0.9, 0.95))
    for group in opt.param_groups:
        assert {k: group[k] for k in expected} == expected
        assert (group["lr"], tuple(group["betas"]), group["weight_decay"]) == (1e-3, betas, 0.1)


@pytest.mark.parametrize("kind", ["adamw_fused_cautious", "adamw_fused_cautious_until400"])
def test_a_suffix_on_torchs_adamw_is_not_a_kind(kind):
    model = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError):
        quality.make(kind, model, lr=1e-3)
