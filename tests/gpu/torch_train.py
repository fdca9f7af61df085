#!/usr/bin/env python3
"""torch_train.py - GPU test: PyTorch training steps captured as graphs, the
two ways training code does it.

Phase 1, a new graph every step: the learning rate follows a schedule and
is a Python float, so it is baked into the optimizer's kernels and the
step must be captured again whenever it changes (here: every step). Each
step copies a new batch into the static input, captures forward, loss,
backward and a momentum SGD update (torch.optim.SGD with foreach
kernels; its momentum buffers live on the GPU) into a new torch.cuda.CUDAGraph, replays it and deletes it.

Phase 2, one graph replayed (PyTorch's "whole network capture"): the step
with a fixed learning rate is captured once and replayed for every batch.
recap sees one capture and one instantiation there and must stay out of
the way.

A second model with the same weights is trained eagerly alongside; after
every step its parameters must match the graph-trained ones. The backward
pass runs on autograd's device thread, so the capture receives kernels
from a thread other than the one that began it (self-recording must
record them, or switch to the driver).

Proves, run plain and under recap (stdout compared byte for byte, recap's
log read by run_all.sh): training steps with backward and an optimizer
keep bit-identical weights under recap, the per-step captures after the
first are served by updates, and a replayed graph is untouched.
Deterministic: fixed seeds, data made on the CPU, TF32 off, deterministic
algorithms. Exit 0 right, 1 a weight differs from the eager run, 77 SKIP.
"""
import os
import sys

import torch_setup

STEPS = int(os.environ.get("GPU_TEST_ITERATIONS", "80"))
REPLAYS = 40
BATCH, WIDTH, CLASSES = 32, 128, 10

torch = torch_setup.import_torch()


def make_model(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU(),
        torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh(),
        torch.nn.Linear(WIDTH, CLASSES)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    return model, optimizer


def batch_for(step):
    generator = torch.Generator().manual_seed(9000 + step)
    x = torch.rand(BATCH, WIDTH, generator=generator) * 2.0 - 1.0
    y = torch.randint(0, CLASSES, (BATCH,), generator=generator)
    return x, y


def train_step(model, optimizer, x, y):
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def learning_rate(step):
    """A warm-up then cosine-like decay, as schedulers give: new every step."""
    return 0.05 * min(1.0, (step + 1) / 10.0) * (1.0 - step / (2.0 * STEPS))


def set_lr(optimizer, lr):
    for group in optimizer.param_groups:
        group["lr"] = lr


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu()


def main():
    device = torch.device("cuda")
    graphed, graphed_opt = make_model(seed=3)
    eager, eager_opt = make_model(seed=3)
    static_x = torch.zeros(BATCH, WIDTH, device=device)
    static_y = torch.zeros(BATCH, dtype=torch.long, device=device)

    # The optimizer's momentum buffers must exist before a capture: one
    # eager step each (same batch, same lr), on a side stream as the
    # documentation asks.
    x0, y0 = batch_for(-1)
    static_x.copy_(x0)
    static_y.copy_(y0)
    torch_setup.warm_up(torch, lambda: train_step(graphed, graphed_opt, static_x, static_y))
    train_step(eager, eager_opt, x0.to(device), y0.to(device))

    results = torch_setup.Results(torch, every=10)
    for step in range(STEPS):
        x, y = batch_for(step)
        lr = learning_rate(step)
        static_x.copy_(x)
        static_y.copy_(y)
        set_lr(graphed_opt, lr)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            train_step(graphed, graphed_opt, static_x, static_y)
        graph.replay()
        torch.cuda.synchronize()
        del graph

        set_lr(eager_opt, lr)
        train_step(eager, eager_opt, x.to(device), y.to(device))
        results.add(step, flat(graphed), flat(eager), " per-step capture")

    lr = learning_rate(STEPS)
    set_lr(graphed_opt, lr)
    set_lr(eager_opt, lr)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        train_step(graphed, graphed_opt, static_x, static_y)
    for replay in range(REPLAYS):
        x, y = batch_for(STEPS + replay)
        static_x.copy_(x)
        static_y.copy_(y)
        graph.replay()
        torch.cuda.synchronize()
        train_step(eager, eager_opt, x.to(device), y.to(device))
        results.add(STEPS + replay, flat(graphed), flat(eager), " replay")
    del graph
    return results.final(STEPS + REPLAYS)


if __name__ == "__main__":
    sys.exit(main())
