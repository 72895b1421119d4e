"""The bounds behind bench/tdclm_torch_reference.py's two variants beyond the spec.
`floor` (row T3d): AdamW's per-element moments, both moving averages from zero, satisfy v >= c * m^2
with c = (1-b2)(1-b1^2/b2)/(1-b1)^2, so flooring TD-CLM's factored second moment at c * m^2 never
raises it above what AdamW would keep, and caps |m / sqrt(v)| at 1 / sqrt(c).
`cover` (row T3g): the SM3-style row and column maxima bound AdamW's per-element moment from above."""
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from tdclm_torch_reference import TDCLMReference, moment_floor  # noqa: E402


@pytest.mark.parametrize("betas", [(0.9, 0.95), (0.9, 0.999), (0.8, 0.99)])
def test_adamw_moments_never_fall_below_the_floor(betas):
    b1, b2 = betas
    c = moment_floor(b1, b2)
    assert c == pytest.approx((1 - b2) * (1 - b1 * b1 / b2) / (1 - b1) ** 2)
    rng = np.random.default_rng(7)
    g = rng.standard_cauchy((400, 20000))  # heavy tails: single spikes
    g[:, :100] = 1.0                        # constant gradients
    g[:, 100:200] = rng.choice([-1.0, 1.0], (400, 100)) * np.geomspace(1, 1e3, 400)[:, None]  # growing
    m = np.zeros(g.shape[1])
    v = np.zeros(g.shape[1])
    for row in g:
        m = b1 * m + (1 - b1) * row
        v = b2 * v + (1 - b2) * row * row
        assert np.all(c * m * m <= v * (1 + 1e-12))


def test_no_floor_where_momentum_outlasts_the_second_moment():
    assert moment_floor(0.99, 0.9) == 0.0  # b1^2 >= b2: no such bound


def _trained(floor, grads):
    p = torch.nn.Parameter(torch.zeros(4, 3))
    opt = TDCLMReference([p], lr=1.0, betas=(0.9, 0.95), eps=0.0, floor=floor)
    for g in grads:
        p.grad = g.clone()
        opt.step()
    return p.detach().clone()


def test_floor_caps_the_outlier_and_leaves_a_rank_one_gradient_alone():
    # A rank-one g^2 is what the factors represent exactly: the floor (below AdamW's v) never binds.
    rank_one = torch.outer(torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([1.0, -0.5, 2.0]))
    assert torch.equal(_trained(True, [rank_one, rank_one]), _trained(False, [rank_one, rank_one]))
    # One element far above the rank-one fit of the rest pulls rho up, so the other elements'
    # factored moment falls far below their own g^2 and their steps balloon; floored, every step
    # stays within 1 / sqrt(c) on the raw moments, i.e. sqrt(1 - b2^t) / (1 - b1^t) / sqrt(c) on the
    # bias-corrected step (lr = 1, no weight decay, t = 1 here).
    spiky = torch.full((4, 3), 1e-3)
    spiky[0, 0] = 10.0
    bound = (1 - 0.95) ** 0.5 / (1 - 0.9) / moment_floor(0.9, 0.95) ** 0.5
    assert _trained(False, [spiky]).abs().max() > 10 * bound
    assert _trained(True, [spiky]).abs().max() <= bound * (1 + 1e-6)


def test_cover_never_falls_below_adamw_moments():
    # bench/tdclm_torch_reference.py's `cover` variant: min(row max, column max) of the previous step,
    # moved towards g^2, is an upper bound on AdamW's per-element average at every step (float64 here;
    # AdamW's average computed on its own), for heavy-tailed, spiky and rank-one gradients alike.
    from tdclm_torch_reference import update_cover
    rng = np.random.default_rng(11)
    b2 = 0.95
    shape = (6, 9)
    row = torch.zeros(shape[0], dtype=torch.float64)
    col = torch.zeros(shape[1], dtype=torch.float64)
    v = np.zeros(shape)
    for t in range(300):
        g = rng.standard_cauchy(shape) if t % 3 else np.outer(rng.normal(size=6), rng.normal(size=9))
        if t == 50:
            g = np.zeros(shape)
            g[2, 4] = 1e4
        v = b2 * v + (1 - b2) * g * g
        nu = update_cover(row, col, torch.from_numpy(g), b2).numpy()
        assert np.all(nu >= v * (1 - 1e-12))
        assert np.allclose(row.numpy(), nu.max(axis=1)) and np.allclose(col.numpy(), nu.max(axis=0))


def test_cover_steps_never_exceed_adamw_steps():
    # With AdamW's moments bounded above, no element's step is larger than AdamW's (lr 1, no weight
    # decay, eps 0), where the factored form's steps balloon past AdamW's. Two spikes in different
    # rows and columns: the elements at their crossings, (0, 1) and (1, 0), get a row maximum and a
    # column maximum from the spikes, so the cover overestimates their moment and their steps shrink
    # below AdamW's; the elements outside the spikes' rows and columns are covered exactly.
    g = torch.full((4, 3), 1e-3)
    g[0, 0] = g[1, 1] = 10.0
    p, q, f = (torch.nn.Parameter(torch.zeros(4, 3)) for _ in range(3))
    cover = TDCLMReference([p], lr=1.0, betas=(0.9, 0.95), eps=0.0, cover=True)
    factored = TDCLMReference([f], lr=1.0, betas=(0.9, 0.95), eps=0.0)
    adamw = torch.optim.AdamW([q], lr=1.0, betas=(0.9, 0.95), eps=0.0, weight_decay=0.0)
    for _ in range(3):
        for t in (p, q, f):
            t.grad = g.clone()
        for opt in (cover, factored, adamw):
            opt.step()
        step, ref = p.detach().abs(), q.detach().abs()
        assert torch.all(step <= ref * (1 + 1e-6))
        assert torch.allclose(step[2:, 2], ref[2:, 2], rtol=1e-5)
    # The first step is sign(g) for every one of them (no history yet); the next two shrink.
    assert step[0, 1] < 0.4 * ref[0, 1] and step[1, 0] < 0.4 * ref[1, 0]
    assert f.detach().abs().max() > 2 * ref.max()
