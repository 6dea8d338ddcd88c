"""Train the tiny DiffusionGemma checkpoints (spec/diffusiongemma.md DG1.2) with a uniform-state denoising loss, so
that their decodes converge: argmax canvases repeat (the stability stop fires at k >= 1), entropies fall (the
confidence stop fires) and an EOS lands inside a canvas, followed by padding.

The task: a prompt ``[BOS, a_1 .. a_n]`` (n = 1..6 content tokens) continues with ``a_1 .. a_n a_1 .. a_n EOS``
and then PAD. A training example is one canvas of that continuation (any canvas index whose canvas holds a
token of it), after the prompt and the clean canvases before it; each canvas token is replaced by a uniform
random token with probability t ~ U(0, 1); half the batches first run without self-conditioning and feed their
detached logits back (the self-conditioning input of the next step); the loss is the cross-entropy over the
canvas.

    python -m tools.training.diffusiongemma --checkpoint shipped --steps 400
    python -m tools.training.diffusiongemma --checkpoint canvas8 --steps 400

It starts from the seeded random model of ``tools.golden.diffusiongemma.CHECKPOINTS`` and writes the checkpoint
folder there (float32); re-record the golden traces afterwards.
"""

from __future__ import annotations

import argparse
import json
import random
import time

import torch
import torch.nn.functional as F

from veridec.models.diffusiongemma import random_diffusiongemma

from ..golden.diffusiongemma import CHECKPOINTS, ROOT

PAD, EOS, BOS, FIRST = 0, 1, 2, 4


def example(rng: random.Random, vocab: int, canvas: int) -> tuple[list[int], list[int]]:
    """(prefix, target canvas): the prompt and the clean canvases before the target one."""
    content = [rng.randrange(FIRST, vocab) for _ in range(rng.randint(1, 6))]
    answer = content + content + [EOS]
    count = -(-len(answer) // canvas)
    index = rng.randrange(count)
    answer += [PAD] * (count * canvas - len(answer))
    return [BOS] + content + answer[:index * canvas], answer[index * canvas:(index + 1) * canvas]


def batch(rng: random.Random, size: int, vocab: int, canvas: int):
    """Left-padded prefixes [B, T], their attention mask, the target canvases [B, L]."""
    pairs = [example(rng, vocab, canvas) for _ in range(size)]
    width = max(len(prefix) for prefix, _ in pairs)
    prefix = torch.tensor([[PAD] * (width - len(p)) + p for p, _ in pairs], device="cpu")
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p, _ in pairs], dtype=torch.bool, device="cpu")
    return prefix, mask, torch.tensor([t for _, t in pairs], device="cpu")


def loss_of(model, prefix, mask, target, generator) -> torch.Tensor:
    rate = torch.rand((target.shape[0], 1), generator=generator, device="cpu")  # t ~ U(0, 1) per example
    noise = torch.randint(0, model.vocab_size, target.shape, generator=generator, device="cpu")
    noisy = torch.where(torch.rand(target.shape, generator=generator, device="cpu") < rate, noise, target)
    conditioning = None
    if torch.rand((), generator=generator, device="cpu") < 0.5:
        with torch.no_grad():
            conditioning = model.full_forward(prefix, mask, noisy, None)
    logits = model.full_forward(prefix, mask, noisy, conditioning)  # [B, L, V]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def train(name: str, steps: int, size: int = 32, lr: float = 3e-3) -> None:
    folder, seed, canvas, spread, text, generation = CHECKPOINTS[name]
    model = random_diffusiongemma(seed, canvas, initializer_range=spread, generation=generation, **text)
    model.hf.train()
    rng, generator = random.Random(seed), torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.hf.parameters(), lr=lr, weight_decay=0.0)
    started = time.perf_counter()
    for step in range(steps):
        prefix, mask, target = batch(rng, size, model.vocab_size, canvas)
        loss = loss_of(model, prefix, mask, target, generator)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0 or step == steps - 1:
            print(f"step {step} loss {loss.item():.3f} ({time.perf_counter() - started:.0f} s)", flush=True)
    model.hf.eval()
    model.hf.save_pretrained(ROOT / folder, safe_serialization=True)
    (ROOT / folder / "generation_config.json").write_text(json.dumps(generation, indent=1) + "\n")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", choices=sorted(CHECKPOINTS), required=True)
    parser.add_argument("--steps", type=int, default=400)
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    train(args.checkpoint, args.steps)


if __name__ == "__main__":
    main()
