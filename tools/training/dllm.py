"""Train the shipped default models with the masked-diffusion objective (LLaDA's pretraining loss).

For each sequence, t ~ U(eps, 1); each token is masked with probability t; the loss is the cross-entropy on
masked positions weighted by 1/t, summed and divided by B * L (an upper bound on the negative log-likelihood).

    python -m tools.training.dllm tasks --out veridec/assets/default --steps 8000
    python -m tools.training.dllm hmm --out veridec/assets/hmm --steps 3000
    python -m tools.training.dllm blocks --out veridec/assets/blocks --steps 3000

``blocks``: an SDAR-layout block-diffusion model on the task corpus (spec/block_diffusion.md BD1), trained as
BD3-LM / SDAR train: the noisy sequence and the clean one side by side, a noisy block attending to itself and the
clean blocks before it, a clean block to the clean blocks up to its own; each block masked at its own rate t; the
block size drawn per batch from TRAIN_BLOCKS so one model decodes at each of them.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from veridec.files import write_text_atomic
from veridec.models import (BidirectionalTransformer, SpecialTokens, TransformerConfig, char_tokenizer, save_pretrained)
from veridec.models.layouts import LAYOUTS
from veridec.oracles import HMMOracle

from veridec.harness.arguments import UsageError, check_output_dir, integer
from veridec.harness.corpus import ALPHABET, generate_document

EPS = 1e-3
HMM_SYMBOLS = "abcdefgh"
HMM_SEED = 11
TRAIN_BLOCKS = (4, 8, 16, 32)  # block sizes of the ``blocks`` world, one drawn per batch


@dataclass
class TrainConfig:
    world: str
    steps: int
    batch_size: int = 32
    length: int = 128
    long_every: int = 4  # every long_every-th batch is long (long_batch x long_length): positions up to 320
    long_length: int = 320
    long_batch: int = 12
    lr: float = 3e-3
    warmup: int = 200
    seed: int = 0
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 384


def world_hmm(num_states: int = 16) -> HMMOracle:
    """The fixed HMM whose samples the HMM-world model learns: 16 states, 8 symbols.

    Each state emits one preferred symbol with probability 0.97; three of every four states move to a fixed
    successor with probability ~0.95, the fourth branches to three random states. Near-deterministic stretches
    of about four symbols alternate with genuine choices (entropy rate ~0.69 nats/symbol).
    """
    rng = np.random.default_rng(HMM_SEED)
    symbols = len(HMM_SYMBOLS)
    emission = np.full((num_states, symbols), 0.03 / (symbols - 1))
    emission[np.arange(num_states), rng.integers(symbols, size=num_states)] = 0.97
    transition = np.zeros((num_states, num_states))
    for s in range(num_states):
        if s % 4 == 3:
            transition[s, rng.choice(num_states, 3, replace=False)] = rng.dirichlet([2.0] * 3)
        else:
            transition[s, (s + 1) % num_states] = 0.95
            transition[s] += 0.05 / num_states
    transition /= transition.sum(1, keepdims=True)
    return HMMOracle(np.full(num_states, 1 / num_states), transition, emission)


class TaskBatches:
    """Documents of task lines, tokenized, EOS-padded to the batch's length."""

    def __init__(self, tokenizer, seed: int):
        self.tok, self.rng = tokenizer, random.Random(seed)

    def __call__(self, batch_size: int, length: int) -> torch.Tensor:
        rows = []
        for _ in range(batch_size):
            ids = self.tok(generate_document(self.rng, length - 1, max_lines=length // 12))["input_ids"]
            rows.append(ids + [self.tok.eos_token_id] * (length - len(ids)))
        return torch.tensor(rows, device="cpu")


class HMMBatches:
    def __init__(self, seed: int):
        self.hmm = world_hmm()
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, batch_size: int, length: int) -> torch.Tensor:
        return self.hmm.sample(batch_size, length, generator=self.generator)


def diffusion_loss(model, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """x [B, L] clean tokens -> the 1/t-weighted masked cross-entropy, divided by B * L."""
    b, n = x.shape
    t = EPS + (1 - EPS) * torch.rand(b, 1, generator=generator, device=generator.device)  # [B, 1]
    masked = torch.rand(b, n, generator=generator, device=generator.device) < t  # [B, L]
    noisy = x.masked_fill(masked, model.special.mask_id)
    logits = model.raw_forward(noisy, torch.arange(n, device=noisy.device).expand(b, n)).logits  # [B, L, V]
    ce = F.cross_entropy(logits[masked].float(), x[masked], reduction="none")
    return (ce / t.expand(b, n)[masked]).sum() / (b * n)


def training_bias(length: int, block_size: int) -> torch.Tensor:
    """[1, 1, 2L, 2L] additive bias over [noisy; clean]: a noisy query sees the noisy keys of its own block and
    the clean keys of earlier blocks; a clean query sees the clean keys of its own and earlier blocks."""
    blocks = torch.arange(length) // block_size  # [L]
    same = blocks[:, None] == blocks[None]  # [L, L]
    earlier = blocks[None] < blocks[:, None]  # [L, L] key block before the query's
    sees = torch.cat([torch.cat([same, earlier], 1),
                      torch.cat([torch.zeros_like(same), same | earlier], 1)], 0)  # [2L, 2L]
    return torch.zeros(sees.shape).masked_fill(~sees, float("-inf"))[None, None]


def block_diffusion_loss(model, x: torch.Tensor, block_size: int, generator: torch.Generator) -> torch.Tensor:
    """x [B, L] clean tokens (L a multiple of block_size) -> the masked cross-entropy of the noisy blocks, each
    weighted by 1/t of its block, divided by B * L."""
    b, n = x.shape
    t = EPS + (1 - EPS) * torch.rand(b, n // block_size, generator=generator, device=generator.device)  # [B, L/b]
    t = t.repeat_interleave(block_size, dim=1)  # [B, L]
    masked = torch.rand(b, n, generator=generator, device=generator.device) < t  # [B, L]
    noisy = x.masked_fill(masked, model.special.mask_id)
    positions = torch.arange(n).repeat(2).expand(b, 2 * n)  # [B, 2L] noisy and clean share positions
    logits = model.raw_forward(torch.cat([noisy, x], 1), positions,
                               attn_bias=training_bias(n, block_size)).logits[:, :n]  # [B, L, V]
    ce = F.cross_entropy(logits[masked].float(), x[masked], reduction="none")
    return (ce / t[masked]).sum() / (b * n)


def world_loss(cfg: TrainConfig, model, batch: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    if cfg.world != "blocks":
        return diffusion_loss(model, batch, generator)
    block = TRAIN_BLOCKS[int(torch.randint(len(TRAIN_BLOCKS), (1,), generator=generator))]
    return block_diffusion_loss(model, batch, block, generator)


def build_model(cfg: TrainConfig, tokenizer) -> BidirectionalTransformer:
    layout = "sdar" if cfg.world == "blocks" else "llada"
    vocab = -(-len(tokenizer) // 4) * 4
    tcfg = TransformerConfig(vocab_size=vocab, hidden_size=cfg.hidden_size, num_layers=cfg.num_layers,
                             num_heads=cfg.num_heads, num_kv_heads=cfg.num_kv_heads,
                             intermediate_size=cfg.intermediate_size, max_length=1024,
                             qk_norm=layout == "sdar")
    special = SpecialTokens(mask_id=tokenizer.mask_token_id, eos_id=tokenizer.eos_token_id,
                            eot_id=tokenizer.convert_tokens_to_ids(LAYOUTS[layout].eot_token),
                            pad_id=tokenizer.pad_token_id)
    model = BidirectionalTransformer(tcfg, special, layout, LAYOUTS[layout].logit_shift)
    generator = torch.Generator().manual_seed(cfg.seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.endswith("norm.weight"):
                p.copy_(torch.randn(p.shape, generator=generator, device=generator.device) * 0.02)
    model.tokenizer = tokenizer
    return model


def validation_loss(cfg: TrainConfig, model, batch: torch.Tensor, repeats: int = 4) -> float:
    generator = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        return sum(world_loss(cfg, model, batch, generator).item() for _ in range(repeats)) / repeats


def train(cfg: TrainConfig, out: Path) -> dict:
    torch.manual_seed(cfg.seed)
    torch.set_flush_denormal(True)  # avoids a 3-6x slowdown late in CPU training
    alphabet = HMM_SYMBOLS if cfg.world == "hmm" else ALPHABET
    tokenizer = char_tokenizer("sdar" if cfg.world == "blocks" else "llada", alphabet)
    make = HMMBatches if cfg.world == "hmm" else (lambda seed: TaskBatches(tokenizer, seed))
    batches, held_out = make(cfg.seed), make(10_000 + cfg.seed)(64, cfg.length)
    model = build_model(cfg, tokenizer).train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.1)
    schedule = lambda s: min(1.0, (s + 1) / cfg.warmup) * 0.5 * (1 + math.cos(math.pi * s / cfg.steps))  # noqa: E731
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    generator = torch.Generator().manual_seed(cfg.seed)
    start, history = time.time(), []
    for step in range(cfg.steps):
        long = cfg.long_every and step % cfg.long_every == cfg.long_every - 1
        batch = batches(cfg.long_batch, cfg.long_length) if long else batches(cfg.batch_size, cfg.length)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = world_loss(cfg, model, batch, generator)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 250 == 0 or step == cfg.steps - 1:
            val = validation_loss(cfg, model.eval(), held_out)
            model.train()
            history.append({"step": step, "train_loss": round(loss.item(), 4), "val_loss": round(val, 4),
                            "seconds": round(time.time() - start, 1)})
            print(json.dumps(history[-1]), flush=True)
    model.eval()
    report = {"config": asdict(cfg), "parameters": sum(p.numel() for p in model.parameters()),
              "wall_seconds": round(time.time() - start, 1), "final_val_loss": history[-1]["val_loss"],
              "history": history, "torch": torch.__version__, "threads": torch.get_num_threads()}
    save_pretrained(model, out)
    if cfg.world == "hmm":
        write_text_atomic(out / "hmm.json", json.dumps(world_hmm().to_dict()))
    write_text_atomic(out / "training_report.json", json.dumps(report, indent=2))
    return report


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("world", choices=["tasks", "hmm", "blocks"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=integer(1), required=True)
    parser.add_argument("--threads", type=integer(1), default=2)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        check_output_dir(args.out, "--out")
    except UsageError as err:
        parser.error(str(err))
    torch.set_num_threads(args.threads)
    train(TrainConfig(world=args.world, steps=args.steps), args.out)


if __name__ == "__main__":
    main()
