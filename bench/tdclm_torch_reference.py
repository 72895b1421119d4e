"""TD-CLM version 2 (spec/luminav-update.md, "TD-CLM second moment", td_factor=factored)
written in plain torch, as an independent reference for training-quality runs on a GPU.

It follows the spec's formulas with nothing shared with LuminaV's kernels: fp32 moments,
bias corrections in double, the row and column means of g^2, rho the mean of the
updated row factor, vhat = row * col / rho (0 where rho = 0), a 1-D tensor's
second moment per element (C = 1). No lam, tau, cautious or bound (their defaults).
"""
from __future__ import annotations

import torch


def update_factors(row, col, g, beta2):
    """One step of the factors' moving averages from the R x C gradient g, in place: the row means
    and (C > 1) the column means of g^2."""
    g2 = g * g
    row.mul_(beta2).add_(g2.mean(dim=1), alpha=1 - beta2)
    if col is not None:
        col.mul_(beta2).add_(g2.mean(dim=0), alpha=1 - beta2)


def factored_second_moment(row, col):
    """The R x C second moment the factors stand for: row * col / rho with rho the mean of row
    (0 where rho = 0); a 1-D tensor (col None) keeps one value per element."""
    if col is None:
        return row[:, None]
    rho = row.mean()
    return torch.where(rho > 0, row[:, None] * col[None, :] / rho, torch.zeros(row.shape[0], col.shape[0],
                                                                              device=row.device))


def update_cover(row, col, g, beta2):
    """One step of an SM3-style cover (Anil et al. 2019, "Memory-Efficient Adaptive Optimization"),
    in place, returning the R x C second moment for this step: each element's previous value is
    taken as min(row max, column max), moved towards g^2, and the new maxima kept. By induction it is
    never below AdamW's per-element moving average of g^2 (the previous min covers the previous
    average, and both move alike), so no element's step exceeds what AdamW's moments would give; the
    same R + C floats as the factored form, and max reductions (no order to fix)."""
    nu = torch.minimum(row[:, None], col[None, :]).mul_(beta2).addcmul_(g, g, value=1 - beta2)
    row.copy_(nu.amax(dim=1))
    col.copy_(nu.amax(dim=0))
    return nu


def moment_floor(beta1, beta2):
    """The c of v >= c * m^2, which AdamW's per-element moments always satisfy (both moving averages
    from zero; Cauchy-Schwarz on m's weights against v's): c = (1-b2)(1-b1^2/b2)/(1-b1)^2, where
    b1^2 < b2 (else 0: no bound). b1 = 0.9, b2 = 0.95: c = 0.737, so |m / sqrt(v)| <= 1.165 on the raw
    moments (the bias-corrected step: that times sqrt(1 - b2^t) / (1 - b1^t), 2.6 at t = 1, ~1.17 by t = 50)."""
    return (1 - beta2) * (1 - beta1 ** 2 / beta2) / (1 - beta1) ** 2 if beta1 ** 2 < beta2 else 0.0


def as_rows(t):
    """The R x C view of a tensor the spec factors: R its first dimension (1 for a scalar)."""
    return t.float().reshape(t.shape[0] if t.dim() else 1, -1)


class TDCLMReference(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, floor=False,
                 cover=False):
        """Two variants beyond the spec. floor: the factored second moment of an element is raised to
        moment_floor(betas) * m^2 where it falls below (no memory: m is kept anyway). cover: the
        factors are update_cover's row and column maxima instead of the means."""
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self.floor = floor
        self.cover = cover

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = as_rows(p.grad)  # R x C, row-major
                rows, cols = g.shape
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(g)
                    state["row"] = torch.zeros(rows, device=g.device)
                    state["col"] = torch.zeros(cols, device=g.device) if cols > 1 else None
                state["step"] += 1
                t = state["step"]
                m = state["exp_avg"]
                m.mul_(beta1).add_(g, alpha=1 - beta1)
                if self.cover and state["col"] is not None:
                    vhat = update_cover(state["row"], state["col"], g, beta2)
                else:
                    update_factors(state["row"], state["col"], g, beta2)
                    vhat = factored_second_moment(state["row"], state["col"])
                if self.floor:
                    vhat = torch.maximum(vhat, moment_floor(beta1, beta2) * m * m)
                bc1 = float(1 - beta1 ** t)  # double, then fp32 in the tensor ops
                bc2 = float(1 - beta2 ** t)
                u = (m / bc1) / ((vhat / bc2).sqrt() + eps)
                x = p.data.float().reshape(rows, cols)
                x.mul_(1 - lr * wd).sub_(u, alpha=lr)
                p.data.copy_(x.reshape(p.shape))
