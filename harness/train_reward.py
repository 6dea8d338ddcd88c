"""Train the shipped default reward model: a tiny Qwen3ForSequenceClassification that predicts the corpus
checkers' validity of a response (spec/guidance.md G8).

Examples: a held-out-style corpus document is cut inside a line (``corpus.split_prompt``); the response is
the next ``RESPONSE_CHARS`` characters of the document, corrupted in half the examples (1-4 random character
substitutions, deletions or insertions); the target is the share of complete lines of (cut line + response)
that pass their checker, as ``veridec experiment`` scores generations. Loss: binary cross-entropy of the
score (a logit) against the target.

    python -m veridec.harness.train_reward --out veridec/assets/reward --steps 3000
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from veridec import corpus
from veridec.guidance.tiny import reward_tokenizer, tiny_reward_model

RESPONSE_CHARS = 64
EDIT_ALPHABET = corpus.ALPHABET.replace("\n", "")


@dataclass
class RewardTrainConfig:
    steps: int = 3000
    batch_size: int = 32
    lr: float = 1e-3
    seed: int = 0
    hidden_size: int = 64
    layers: int = 2
    eval_examples: int = 1000


def chat_text(prompt: str, response: str) -> str:
    return f"<user>{prompt}\n<assistant>{response}\n"  # what the tokenizer's chat template renders


def response_validity(prompt: str, response: str) -> float | None:
    """Share of the complete lines of (the prompt's cut line + response) that pass their checker; None when
    the response completes no line."""
    lines = (prompt.split("\n")[-1] + response).split("\n")[:-1]
    if not lines:
        return None
    return sum(corpus.check_line(line) for line in lines) / len(lines)


def corrupt(text: str, rng: random.Random) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(chars))
        kind = rng.random()
        if kind < 0.5:
            chars[i] = rng.choice(EDIT_ALPHABET)
        elif kind < 0.75 and len(chars) > 1:
            del chars[i]
        else:
            chars.insert(i, rng.choice(EDIT_ALPHABET))
    return "".join(chars)[:RESPONSE_CHARS]


def example(rng: random.Random) -> tuple[str, str, float]:
    while True:
        document = corpus.generate_document(rng, 200, max_lines=10)
        prompt, _ = corpus.split_prompt(document, rng)
        response = document[len(prompt):len(prompt) + RESPONSE_CHARS]
        if rng.random() < 0.5:
            response = corrupt(response, rng)
        target = response_validity(prompt, response)
        if target is not None:
            return prompt, response, target


def batch_tensors(tokenizer, examples) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    encoded = tokenizer([chat_text(p, r) for p, r, _ in examples], padding=True, return_tensors="pt")
    return encoded["input_ids"], encoded["attention_mask"], torch.tensor([t for _, _, t in examples])


def evaluate(model, tokenizer, examples) -> dict:
    """Held-out agreement with the checkers: AUC of the score for fully valid vs not, Pearson r vs target."""
    model.eval()
    with torch.no_grad():
        scores = torch.cat([model(*batch_tensors(tokenizer, examples[i:i + 64])[:2]).logits[:, 0]
                            for i in range(0, len(examples), 64)])
    targets = torch.tensor([t for _, _, t in examples])
    positive, negative = scores[targets == 1], scores[targets < 1]
    auc = (positive[:, None] > negative[None, :]).double().mean().item()
    r = torch.corrcoef(torch.stack([scores, targets]))[0, 1].item()
    model.train()
    return {"auc_valid_vs_not": round(auc, 4), "pearson_r": round(r, 4), "examples": len(examples),
            "share_fully_valid": round((targets == 1).double().mean().item(), 4)}


def train(config: RewardTrainConfig, out: Path) -> dict:
    rng = random.Random(config.seed)
    held_out = [example(random.Random(10_000 + i)) for i in range(config.eval_examples)]
    model, tokenizer = tiny_reward_model(config.seed, config.hidden_size, config.layers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    start = time.time()
    for step in range(config.steps):
        ids, mask, target = batch_tensors(tokenizer, [example(rng) for _ in range(config.batch_size)])
        loss = F.binary_cross_entropy_with_logits(model(ids, attention_mask=mask).logits[:, 0], target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 500 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    report = {"config": asdict(config), "parameters": sum(p.numel() for p in model.parameters()),
              "wall_seconds": round(time.time() - start), "final_loss": round(loss.item(), 4),
              "held_out": evaluate(model, tokenizer, held_out)}
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "training_report.json").write_text(json.dumps(report, indent=2))
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--hidden-size", type=int, default=RewardTrainConfig.hidden_size)
    parser.add_argument("--layers", type=int, default=RewardTrainConfig.layers)
    parser.add_argument("--lr", type=float, default=RewardTrainConfig.lr)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    config = RewardTrainConfig(steps=args.steps, hidden_size=args.hidden_size, layers=args.layers, lr=args.lr)
    print(json.dumps(train(config, args.out), indent=2))


if __name__ == "__main__":
    main()
