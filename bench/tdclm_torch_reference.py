"""TD-CLM version 2 (spec/luminav-update.md, "TD-CLM second moment", td_factor=factored)
written in plain torch, as an independent reference for training-quality runs on a GPU.

It follows the spec's formulas with nothing shared with LuminaV's kernels: fp32 moments,
bias corrections in double, the row and column means of g^2, rho the mean of the
updated row factor, vhat = row * col / rho (0 where rho = 0), a 1-D tensor's
second moment per element (C = 1). No lam, tau, cautious or bound (their defaults).
"""
from __future__ import annotations

import torch


class TDCLMReference(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.float().reshape(p.shape[0] if p.dim() else 1, -1)  # R x C, row-major
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
                g2 = g * g
                row = state["row"].mul_(beta2).add_(g2.mean(dim=1), alpha=1 - beta2)
                if cols > 1:
                    col = state["col"].mul_(beta2).add_(g2.mean(dim=0), alpha=1 - beta2)
                    rho = row.mean()
                    vhat = torch.where(rho > 0, row[:, None] * col[None, :] / rho, torch.zeros_like(g))
                else:
                    vhat = row[:, None]
                bc1 = float(1 - beta1 ** t)  # double, then fp32 in the tensor ops
                bc2 = float(1 - beta2 ** t)
                u = (m / bc1) / ((vhat / bc2).sqrt() + eps)
                x = p.data.float().reshape(rows, cols)
                x.mul_(1 - lr * wd).sub_(u, alpha=lr)
                p.data.copy_(x.reshape(p.shape))
