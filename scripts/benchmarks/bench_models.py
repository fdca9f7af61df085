"""bench_models.py - real models captured anew every iteration, for
scripts/bench-python --paired (issue 27): recap's default, self_record = off
and mode = off compared inside one process, as python_paired.py
compares the GPU suite's loops.

  resnet18  torchvision's ResNet-18 (random weights, eval mode), batch 8,
            3x224x224: one forward captured into a new torch.cuda.CUDAGraph,
            replayed, read and released every iteration (a new input each).
  decoder   a transformer decode step: torch.nn.TransformerDecoderLayer
            (d_model 256, 8 heads, feed-forward 1024, no dropout, eval) on
            one new token against a 32-position memory, the batch cycling
            1, 2, 4, 8 (four graph shapes at one capture site).

Interface (what python_paired.py uses; importing this module imports
no torch):
  MODELS   {name: loop}; loop() sets the model up and returns the five
           functions every bench_python_paired loop returns:
             prepare(iteration)         untimed, once before the three ways
             section(iteration, marks)  timed: capture, replay, read, release
             result(returned)           untimed: the result on the host
             right(iteration, got)      the result against eager
             same(a, b)                 two ways' results equal (bit for bit)
           A loop exits 77 with a "SKIP: ..." line when torch, a GPU or
           torchvision is missing.

Deterministic: torch_setup's settings (fixed seeds, TF32 off,
deterministic algorithms); inputs made on the CPU from the iteration.
"""
import sys

RESNET_BATCH = 8
DECODER_BATCHES = (1, 2, 4, 8)
D_MODEL, HEADS, FEED_FORWARD, MEMORY = 256, 8, 1024, 32


def _torch():
    import torch_setup  # tests/gpu, put on sys.path by python_paired.py
    return torch_setup, torch_setup.import_torch()


def _inputs(torch, seed, *shape):
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=generator) * 2.0 - 1.0


def _close(torch, got, eager):
    return bool(torch.allclose(got, eager, rtol=1e-4, atol=1e-4))


def resnet18_loop():
    setup, torch = _torch()
    try:
        import torchvision
    except ImportError as e:
        print(f"SKIP: resnet18 needs torchvision, not importable here: {e}")
        sys.exit(setup.SKIP)
    torch.manual_seed(18)
    model = torchvision.models.resnet18(weights=None).cuda().eval()
    static_x = torch.zeros(RESNET_BATCH, 3, 224, 224, device="cuda")

    def forward():
        with torch.no_grad():
            return model(static_x)

    setup.warm_up(torch, lambda: [forward() for _ in range(3)])

    def prepare(iteration):
        static_x.copy_(_inputs(torch, 1800 + iteration, RESNET_BATCH, 3, 224, 224))

    def section(iteration, marks):
        return setup.capture_once(torch, forward, marks)

    def right(iteration, got):
        return _close(torch, got, forward().cpu())

    return prepare, section, (lambda returned: returned), right, \
        lambda a, b: bool(torch.equal(a, b))


def decoder_loop():
    setup, torch = _torch()
    torch.manual_seed(27)
    layer = torch.nn.TransformerDecoderLayer(D_MODEL, HEADS, dim_feedforward=FEED_FORWARD,
                                             dropout=0.0, batch_first=True).cuda().eval()
    tokens = {b: torch.zeros(b, 1, D_MODEL, device="cuda") for b in DECODER_BATCHES}
    memory = {b: _inputs(torch, 2700 + b, b, MEMORY, D_MODEL).cuda() for b in DECODER_BATCHES}

    def batch_of(iteration):
        return DECODER_BATCHES[iteration % len(DECODER_BATCHES)]

    def step(batch):
        with torch.no_grad():
            return layer(tokens[batch], memory[batch])

    setup.warm_up(torch, lambda: [step(b) for b in DECODER_BATCHES])

    def prepare(iteration):
        batch = batch_of(iteration)
        tokens[batch].copy_(_inputs(torch, 2800 + iteration, batch, 1, D_MODEL))

    def section(iteration, marks):
        return setup.capture_once(torch, lambda: step(batch_of(iteration)), marks)

    def right(iteration, got):
        return _close(torch, got, step(batch_of(iteration)).cpu())

    return prepare, section, (lambda returned: returned), right, \
        lambda a, b: bool(torch.equal(a, b))


MODELS = {"resnet18": resnet18_loop, "decoder": decoder_loop}
