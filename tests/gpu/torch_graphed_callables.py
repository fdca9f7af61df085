#!/usr/bin/env python3
"""torch_graphed_callables.py - GPU test: PyTorch's CUDA graph features one
after the other in one process, each checked against the same work run
eagerly (issue 26: whatever recap journals and replays, the program gets
what it gets without recap).

Parts, in order (each prints one or more "part NAME ..." lines):
  graphed_callables  torch.cuda.make_graphed_callables on a small MLP
                     (forward and backward graphs), three models in turn,
                     four SGD steps each, against an eager twin; each model
                     deleted before the next, so its graphs are released;
  shared_pool        two graphs sharing a memory pool (graph_pool_handle),
                     the second reading the first's output, captured anew
                     every iteration and replayed in capture order;
  random             dropout and rand_like inside a graph, replayed three
                     times per capture: every dropout output is 0 or twice
                     its input, every random value in [0, 1), and the
                     replays draw new numbers;
  fork_join          work forked onto a side stream and joined back inside
                     the capture (into tensors allocated before it);
  reset              one CUDAGraph captured, replayed and reset() again and
                     again, the scale changing each time;
  adam_step          a whole training step (forward, loss, backward,
                     Adam(capturable=True)) captured, replayed for four
                     batches, captured again (three rounds), against an
                     eager twin with the same optimizer;
  lstm               a two-layer cuDNN LSTM's forward captured per iteration;
  batches            one capture site, the batch cycling 1, 4, 16;
  sync_in_capture    for each capture_error_mode (global, thread_local,
                     relaxed): three captures at one site, then one calling
                     torch.cuda.synchronize() inside the capture - the
                     error is expected and its class printed - then one
                     more capture there, which must work.

Output: per part its checksums (sums rounded to 6 significant digits) and
its mismatches against eager; a part that raises where no error is
expected prints the exception's class and the program goes on (a torch
limitation shows the same with and without recap; an error recap caused
makes the outputs differ). Deterministic: fixed seeds, data made on the
CPU, TF32 off, deterministic algorithms. Exit 0 right, 1 a result differed
from eager, 77 SKIP (no torch or no GPU).
"""
import gc
import sys

import torch_setup

torch = torch_setup.import_torch()
F = torch.nn.functional
WIDTH, CLASSES = 64, 8
MODES = ("global", "thread_local", "relaxed")


def checksum(t):
    """Two sums of a tensor, rounded: what the part prints."""
    t = t.detach().double()
    return f"{t.sum().item():.6g}/{t.abs().sum().item():.6g}"


def close(a, b, rtol=1e-5, atol=1e-6):
    return bool(torch.allclose(a, b, rtol=rtol, atol=atol))


def data(seed, *shape):
    generator = torch.Generator().manual_seed(seed)
    return (torch.rand(*shape, generator=generator) * 2.0 - 1.0).cuda()


def mlp(seed, dropout=0.0):
    torch.manual_seed(seed)
    layers = [torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU()]
    if dropout:
        layers.append(torch.nn.Dropout(dropout))
    layers += [torch.nn.Linear(WIDTH, CLASSES)]
    return torch.nn.Sequential(*layers).cuda()


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def warm_up(run):
    torch_setup.warm_up(torch, run)


# ---- the parts: each returns its mismatches against eager -----------------

def part_graphed_callables():
    mismatches = 0
    for number, seed in enumerate((11, 12, 13)):
        model, twin = mlp(seed), mlp(seed)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        twin_opt = torch.optim.SGD(twin.parameters(), lr=0.05, momentum=0.9)
        sample = torch.zeros(16, WIDTH, device="cuda")
        graphed = torch.cuda.make_graphed_callables(model, (sample,))
        for step in range(4):
            x = data(100 * seed + step, 16, WIDTH)
            y = data(100 * seed + step + 50, 16, CLASSES)
            for net, optimizer in ((graphed, opt), (twin, twin_opt)):
                optimizer.zero_grad(set_to_none=True)
                F.mse_loss(net(x), y).backward()
                optimizer.step()
        bad = not close(flat(model), flat(twin))
        mismatches += bad
        print(f"part graphed_callables model {number}: weights {checksum(flat(model))} "
              f"{'DIFFER from' if bad else 'match'} eager")
        del graphed, model, twin, opt, twin_opt
        gc.collect()
    return mismatches


def part_shared_pool():
    mismatches = 0
    w1, w2 = data(21, WIDTH, WIDTH) / 8.0, data(22, WIDTH, WIDTH) / 8.0
    x = torch.zeros(32, WIDTH, device="cuda")
    warm_up(lambda: torch.tanh(torch.relu(x @ w1) @ w2))
    for iteration in range(10):
        x.copy_(data(200 + iteration, 32, WIDTH))
        scale = 0.5 + 0.125 * (iteration % 4)
        pool = torch.cuda.graph_pool_handle()
        first, second = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(first, pool=pool):
            h = torch.relu(x @ w1) * scale
        with torch.cuda.graph(second, pool=pool):
            y = torch.tanh(h @ w2)
        first.replay()
        second.replay()
        torch.cuda.synchronize()
        eager = torch.tanh((torch.relu(x @ w1) * scale) @ w2)
        mismatches += not close(y, eager)
        if iteration % 5 == 4:
            print(f"part shared_pool iteration {iteration + 1}: {checksum(y)}")
        del first, second, h, y
    return mismatches


def part_random():
    mismatches = 0
    torch.manual_seed(31)
    x = data(31, 64, WIDTH) + 2.0          # no zeros: a dropped element reads 0
    warm_up(lambda: (F.dropout(x, 0.5, training=True), torch.rand_like(x)))
    for capture in range(5):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            dropped = F.dropout(x, 0.5, training=True)
            noise = torch.rand_like(x)
        masks = []
        for replay in range(3):
            graph.replay()
            torch.cuda.synchronize()
            kept = dropped != 0
            masks.append(kept.clone())
            mismatches += not bool(((~kept) | (dropped == x * 2.0)).all())
            mismatches += not bool(((noise >= 0) & (noise < 1)).all())
            print(f"part random capture {capture} replay {replay}: dropout {checksum(dropped)} "
                  f"kept {int(kept.sum())} rand {checksum(noise)}")
        mismatches += bool(torch.equal(masks[0], masks[1]) and torch.equal(masks[1], masks[2]))
        del graph, dropped, noise
    return mismatches


def part_fork_join():
    mismatches = 0
    side = torch.cuda.Stream()
    w = data(41, WIDTH, WIDTH) / 8.0
    x = torch.zeros(32, WIDTH, device="cuda")
    a = torch.empty(32, WIDTH, device="cuda")
    b = torch.empty(32, WIDTH, device="cuda")
    y = torch.empty(32, WIDTH, device="cuda")
    warm_up(lambda: torch.mm(x, w, out=a))
    for iteration in range(10):
        x.copy_(data(400 + iteration, 32, WIDTH))
        scale = 1.0 + 0.25 * (iteration % 3)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                torch.mul(x, scale, out=b)
                torch.sigmoid_(b)
            torch.mm(x, w, out=a)
            torch.cuda.current_stream().wait_stream(side)
            torch.add(a, b, out=y)
        graph.replay()
        torch.cuda.synchronize()
        mismatches += not close(y, x @ w + torch.sigmoid(x * scale))
        if iteration % 5 == 4:
            print(f"part fork_join iteration {iteration + 1}: {checksum(y)}")
        del graph
    return mismatches


def part_reset():
    mismatches = 0
    w = data(51, WIDTH, WIDTH) / 8.0
    x = data(52, 32, WIDTH)
    warm_up(lambda: torch.relu(x @ w))
    graph = torch.cuda.CUDAGraph()
    for round_ in range(6):
        scale = 0.25 + 0.25 * round_
        with torch.cuda.graph(graph):
            y = torch.relu(x @ w) * scale
        graph.replay()
        torch.cuda.synchronize()
        mismatches += not close(y, torch.relu(x @ w) * scale)
        print(f"part reset round {round_}: {checksum(y)}")
        del y
        graph.reset()
    del graph
    return mismatches


def part_adam_step():
    mismatches = 0
    model, twin = mlp(61), mlp(61)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=True, foreach=True)
    twin_opt = torch.optim.Adam(twin.parameters(), lr=1e-3, capturable=True, foreach=True)
    static_x = torch.zeros(16, WIDTH, device="cuda")
    static_y = torch.zeros(16, CLASSES, device="cuda")

    def train(net, optimizer, x, y):
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(net(x), y)
        loss.backward()
        optimizer.step()
        return loss

    static_x.copy_(data(600, 16, WIDTH))
    static_y.copy_(data(601, 16, CLASSES))
    warm_up(lambda: [train(model, opt, static_x, static_y) for _ in range(3)])
    for _ in range(3):
        train(twin, twin_opt, static_x, static_y)
    batch = 0
    for round_ in range(3):
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            loss = F.mse_loss(model(static_x), static_y)
            loss.backward()
            opt.step()
        for _ in range(4):
            x, y = data(610 + batch, 16, WIDTH), data(660 + batch, 16, CLASSES)
            batch += 1
            static_x.copy_(x)
            static_y.copy_(y)
            graph.replay()
            train(twin, twin_opt, x, y)
        torch.cuda.synchronize()
        bad = not close(flat(model), flat(twin), rtol=1e-4, atol=1e-6)
        mismatches += bad
        print(f"part adam_step round {round_}: loss {loss.item():.6g} weights "
              f"{checksum(flat(model))} {'DIFFER from' if bad else 'match'} eager")
        del graph, loss
    return mismatches


def part_lstm():
    mismatches = 0
    torch.manual_seed(71)
    lstm = torch.nn.LSTM(16, 32, num_layers=2, batch_first=True).cuda().eval()
    x = torch.zeros(4, 8, 16, device="cuda")
    with torch.no_grad():
        warm_up(lambda: lstm(x))
        for iteration in range(5):
            x.copy_(data(700 + iteration, 4, 8, 16))
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out, (h, c) = lstm(x)
            graph.replay()
            torch.cuda.synchronize()
            eager, (eager_h, eager_c) = lstm(x)
            mismatches += not (close(out, eager) and close(h, eager_h) and close(c, eager_c))
            print(f"part lstm iteration {iteration}: out {checksum(out)} h {checksum(h)}")
            del graph, out, h, c
    return mismatches


def capture_replay(run, **graph_args):
    """run() captured into a new CUDAGraph (graph_args: torch.cuda.graph's
    keywords), replayed once; returns a copy of its result, the graph
    released."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, **graph_args):
        y = run()
    graph.replay()
    torch.cuda.synchronize()
    got = y.clone()
    del graph, y
    return got


def capture_forward(model, x):
    """One capture site for every batch size."""
    return capture_replay(lambda: model(x))


def part_batches():
    mismatches = 0
    model = mlp(81).eval()
    inputs = {b: torch.zeros(b, WIDTH, device="cuda") for b in (1, 4, 16)}
    with torch.no_grad():
        warm_up(lambda: [model(x) for x in inputs.values()])
        for iteration in range(12):
            batch = (1, 4, 16)[iteration % 3]
            x = inputs[batch]
            x.copy_(data(800 + iteration, batch, WIDTH))
            got = capture_forward(model, x)
            mismatches += not close(got, model(x))
            print(f"part batches iteration {iteration} batch {batch}: {checksum(got)}")
    return mismatches


def capture_in_mode(mode, x, scale, sync):
    """One capture site for every mode; `sync`: torch.cuda.synchronize()
    inside the capture, which the driver refuses."""
    def body():
        y = torch.tanh(x * scale) + 1.0
        if sync:
            torch.cuda.synchronize()
        return y
    return capture_replay(body, capture_error_mode=mode)


def part_sync_in_capture():
    mismatches = 0
    x = data(91, 32, WIDTH)
    warm_up(lambda: torch.tanh(x * 0.5) + 1.0)
    home = torch.cuda.current_stream()
    for mode in MODES:
        for iteration in range(3):
            scale = 0.5 + 0.25 * iteration
            mismatches += not close(capture_in_mode(mode, x, scale, False),
                                    torch.tanh(x * scale) + 1.0)
        try:
            capture_in_mode(mode, x, 2.0, True)
            outcome = "no error"
            mismatches += 1
        except Exception as e:       # noqa: BLE001 - the class is what is printed
            cause = e.__context__ or e.__cause__
            outcome = type(e).__name__ + (f" after {type(cause).__name__}" if cause else "")
        gc.collect()
        # A failed capture's end leaves torch's capture stream current.
        torch.cuda.set_stream(home)
        capturing = torch.cuda.is_current_stream_capturing()
        got = capture_in_mode(mode, x, 3.0, False)
        bad = not close(got, torch.tanh(x * 3.0) + 1.0)
        mismatches += bad + capturing
        print(f"part sync_in_capture {mode}: {outcome}; then capturing {capturing}, next capture "
              f"{checksum(got)} {'DIFFERS from' if bad else 'matches'} eager")
    return mismatches


PARTS = (part_graphed_callables, part_shared_pool, part_random, part_fork_join, part_reset,
         part_adam_step, part_lstm, part_batches, part_sync_in_capture)


def main():
    torch.manual_seed(0)
    home = torch.cuda.current_stream()
    mismatches = raised = 0
    for part in PARTS:
        name = part.__name__[len("part_"):]
        try:
            bad = part()
            print(f"part {name}: mismatches {bad}")
            mismatches += bad
        except Exception as e:       # noqa: BLE001 - a torch limitation shows in both runs
            raised += 1
            print(f"part {name}: raised {type(e).__name__}")
            print(f"{name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                  file=sys.stderr)
            torch.cuda.set_stream(home)
        torch.cuda.synchronize()
        gc.collect()
    print(f"final parts {len(PARTS)} raised {raised} mismatches {mismatches}")
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
