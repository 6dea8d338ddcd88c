"""Train the shipped default reward model: a tiny Qwen3ForSequenceClassification that predicts the corpus
checkers' validity of a dLLM response (spec/guidance.md G3b).

The reward must rank the responses guidance steers between, so it is trained on the default dLLM's own
generations (on-policy): corpus prompts (``corpus.split_prompt``, seeds disjoint from the experiments'),
responses sampled at T = 0.7 by sequential and parallel rules with the dual cache, at gen lengths 64 and 128,
labelled with the share of the response's lines that pass their checker, exactly as ``veridec experiment``
scores generations (the prompt's cut line first; a line cut by the gen length is not scored). Each batch mixes
three sources: those generations as sampled, the same with 1-3 random character edits in the written text, and
the document's true continuation (valid) with or without edits. A guided round (``--init DIR --guided-examples
N``) continues training a reward folder on generations *guided by that reward* (cached-guidance parallel rules
and FastGuide, EntRGi), labelled by the checkers, so responses that raise the score without being valid (reward
hacking) are seen and scored low (measured not to help at this model size: spec/guidance.md G3b). The network
sees each example exactly as ``TransformersReward.score_tokens`` presents it (chat template around the
response's tokens, left padding). Loss: binary cross-entropy of the score (a logit) against the target.

    python -m tools.training.reward --out veridec/assets/reward --threads 1        # the shipped model
    python -m tools.training.reward --out /tmp/guided --init veridec/assets/reward \
        --guided-examples 1024 --policy-examples 1024 --steps 1500 --lr 1e-3              # a guided round
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from veridec.canvas import left_pad
from veridec.checks import check_range
from veridec.files import write_text_atomic
from veridec.guidance.fastguide import FastGuideParams
from veridec.guidance.guide import GuidanceParams
from veridec.guidance.reward import TransformersReward
from veridec.guidance.tiny import tiny_reward_model
from veridec.models.shipped import load_model
from veridec.optimized.fastguide import generate as fastguide
from veridec.optimized.parallel import decode
from veridec.reference.guided import parallel_guided
from veridec.rules.presets import PRESETS

from veridec.harness import corpus
from veridec.harness.arguments import UsageError, check_output_dir, integer
from veridec.harness.workloads import BLOCK, corpus_cases, line_score

GEN_LENGTHS = (64, 128)
POLICY_RULES = ("sequential", "conf-hq", "fastdllm-hq", "eb-hq", "localleap")  # presets, dual cache
GUIDED_DECODERS = ("eb-hq", "dapd-hq", "klass-hq", "conf-hq", "fastdllm-hq", "fastguide-hq", "fastguide-ht")
EDIT_ALPHABET = corpus.ALPHABET.replace("\n", "")


@dataclass
class RewardTrainConfig:
    steps: int = 4000
    batch_size: int = 32
    lr: float = 2e-3
    seed: int = 0
    hidden_size: int = 128
    layers: int = 3
    policy_examples: int = 3072  # dLLM generations in the training pool
    eval_examples: int = 512  # held-out generations (other prompts)
    guided_examples: int = 0  # generations guided by the initial reward, added to the pool
    init: str | None = None  # a reward folder to continue training (its size replaces hidden_size / layers)

    def __post_init__(self):
        for name in ("steps", "batch_size", "layers", "policy_examples", "eval_examples"):
            check_range(name, getattr(self, name), low=1, integer=True)
        check_range("guided_examples", self.guided_examples, low=0, integer=True)
        check_range("lr", self.lr, low=0, low_open=True)
        if self.hidden_size < 4 or self.hidden_size % 4:
            raise ValueError(f"hidden_size must be a positive multiple of 4 (4 heads), got {self.hidden_size}")
        if self.init is not None and not (Path(self.init) / "config.json").exists():
            raise FileNotFoundError(f"init: {self.init} has no config.json (a reward folder to continue training)")


@dataclass(frozen=True)
class Example:
    prompt: str
    response: tuple[int, ...]  # dLLM token ids of the whole generated region (EOS-padded)
    target: float


def response_validity(model, prompt: str, response: list[int]) -> float | None:
    """Share of the response's scored lines (the prompt's cut line first) that pass their checker; None when
    it completes no line."""
    score = line_score(model, torch.tensor(response, device="cpu"), 0, prompt)
    return score.rate if score.lines else None


def generated_pool(model, n: int, seed: int, decoders: tuple, decode_batch, batch: int = 32) -> list[Example]:
    """n labelled generations: batches of corpus prompts, cycling ``decoders`` and the gen lengths;
    ``decode_batch(name, prompt, mask, texts, gen, generator)`` returns the canvases [B, P + gen]."""
    rng = random.Random(seed)
    pool, round_, batch = [], 0, min(batch, n)
    while len(pool) < n:
        name = decoders[round_ % len(decoders)]
        gen = GEN_LENGTHS[(round_ // len(decoders)) % len(GEN_LENGTHS)]
        texts = [case.prompt for case in corpus_cases(batch, rng)]
        prompt, mask = left_pad([model.tokenizer(t)["input_ids"] for t in texts], model.special.pad_id)
        canvas = decode_batch(name, prompt, mask, texts, gen, torch.Generator().manual_seed(seed * 100_000 + round_))
        for text, row in zip(texts, canvas[:, prompt.shape[1]:].tolist()):
            target = response_validity(model, text, row)
            if target is not None:
                pool.append(Example(text, tuple(row), target))
        round_ += 1
    return pool[:n]


def policy_pool(model, n: int, seed: int) -> list[Example]:
    """n unguided generations at T = 0.7 (sequential over the whole response, parallel rules in blocks of BLOCK,
    dual cache)."""
    def unguided(name, prompt, mask, texts, gen, generator):
        return decode(model, prompt, mask, rule=PRESETS[name], gen_length=gen, temperature=0.7, generator=generator,
                      block_length=gen if name == "sequential" else BLOCK).canvas

    return generated_pool(model, n, seed, POLICY_RULES, unguided)


def guided_pool(model, reward: TransformersReward, n: int, seed: int) -> list[Example]:
    """n generations guided by ``reward`` (EntRGi): cached-guidance parallel rules and FastGuide k 8 / k 16."""
    def guided(name, prompt, mask, texts, gen, generator):
        if name.startswith("fastguide"):
            params = FastGuideParams(k=8 if name == "fastguide-hq" else 16)
            return fastguide(model, prompt, reward, texts, mask, gen_length=gen, params=params,
                             generator=generator).canvas
        return parallel_guided(model, prompt, reward, texts, PRESETS[name], mask, gen_length=gen,
                               guidance=GuidanceParams(), generator=generator).canvas

    reward.model.requires_grad_(False)  # guidance differentiates the embeddings only
    try:
        return generated_pool(model, n, seed, GUIDED_DECODERS, guided, batch=16)
    finally:
        reward.model.requires_grad_(True)


def edited(model, example: Example, rng: random.Random) -> Example | None:
    """1-3 random character substitutions, deletions or insertions in the written text (before EOS), the
    region kept at its length (EOS-padded or cut); relabelled."""
    ids, eos = list(example.response), model.special.eos_id
    written = ids[:ids.index(eos)] if eos in ids else ids[:]  # a copy: ids keeps the region's length
    if not written:
        return None
    alphabet = model.tokenizer(EDIT_ALPHABET)["input_ids"]
    for _ in range(rng.randint(1, 3)):
        i, kind = rng.randrange(len(written)), rng.random()
        if kind < 0.5:
            written[i] = rng.choice(alphabet)
        elif kind < 0.75 and len(written) > 1:
            del written[i]
        else:
            written.insert(i, rng.choice(alphabet))
    response = (written + [eos] * len(ids))[:len(ids)]
    target = response_validity(model, example.prompt, response)
    return None if target is None else Example(example.prompt, tuple(response), target)


def continuation(model, rng: random.Random) -> Example:
    """A corpus prompt with its true continuation then EOS (valid), edited half the time."""
    while True:
        document, prompt, _ = corpus_cases(1, rng)[0]
        rest = document[len(prompt):]
        gen = rng.choice(GEN_LENGTHS)
        ids = model.tokenizer(rest)["input_ids"][:gen]
        response = ids + [model.special.eos_id] * (gen - len(ids))
        target = response_validity(model, prompt, response)
        if target is None:
            continue
        example = Example(prompt, tuple(response), target)
        if rng.random() < 0.5:
            example = edited(model, example, rng) or example
        return example


def training_batch(model, pool: list[Example], size: int, rng: random.Random) -> list[Example]:
    """Half sampled generations, a quarter edited generations, a quarter true continuations (edited or not)."""
    batch = [rng.choice(pool) for _ in range(size // 2)]
    while len(batch) < 3 * size // 4:
        batch.append(edited(model, rng.choice(pool), rng) or rng.choice(pool))
    while len(batch) < size:
        batch.append(continuation(model, rng))
    return batch


class Inputs:
    """Examples -> (input_ids, attention_mask) as ``TransformersReward.score_tokens`` lays them out: the chat
    template's prefix and suffix around the response's reward-token ids, left-padded."""

    def __init__(self, reward_model, tokenizer, dllm_tokenizer):
        self.scorer = TransformersReward(reward_model, tokenizer, dllm_tokenizer)
        self.pad = tokenizer.pad_token_id
        self.templates = {}

    def __call__(self, examples: list[Example]) -> tuple[torch.Tensor, torch.Tensor]:
        rows = []
        for e in examples:
            if e.prompt not in self.templates:
                self.templates[e.prompt] = self.scorer.template_ids(e.prompt)
            before, after = self.templates[e.prompt]
            rows.append(before + self.scorer.reward_ids[list(e.response)].tolist() + after)
        return left_pad(rows, self.pad)  # [B, L] each


def agreement_on(model, inputs: Inputs, examples: list[Example]) -> dict:
    with torch.no_grad():
        scores = torch.cat([model(*inputs(examples[i:i + 64])).logits[:, 0] for i in range(0, len(examples), 64)])
    return agreement(scores, torch.tensor([e.target for e in examples], device=scores.device))


def initial_model(config: RewardTrainConfig):
    """A fresh tiny reward model, or the ``init`` folder's to continue training."""
    if config.init is None:
        return tiny_reward_model(config.seed, config.hidden_size, config.layers)
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(config.init, local_files_only=True,
                                                               use_safetensors=True)  # never a pickle
    return model, AutoTokenizer.from_pretrained(config.init, local_files_only=True)


def agreement(scores: torch.Tensor, targets: torch.Tensor) -> dict:
    """AUC of the score for fully valid vs not, Pearson r against the validity share (None where undefined:
    one class only, or a constant)."""
    positive, negative = scores[targets == 1], scores[targets < 1]
    auc = (positive[:, None] > negative[None, :]).double().mean().item() if len(positive) and len(negative) else None
    defined = len(targets) > 1 and scores.std() > 0 and targets.double().std() > 0
    r = torch.corrcoef(torch.stack([scores.double(), targets.double()]))[0, 1].item() if defined else None
    rounded = lambda v: None if v is None else round(v, 4)  # noqa: E731
    return {"auc_valid_vs_not": rounded(auc), "pearson_r": rounded(r), "examples": len(targets),
            "share_fully_valid": round((targets == 1).double().mean().item(), 4)}


def train(config: RewardTrainConfig, out: Path) -> dict:
    rng = random.Random(config.seed)
    dllm = load_model("default", dtype=torch.float32)
    start = time.time()
    model, tokenizer = initial_model(config)
    if config.init:
        config = replace(config, hidden_size=model.config.hidden_size, layers=model.config.num_hidden_layers)
    inputs = Inputs(model, tokenizer, dllm.tokenizer)
    round_seed = 1 + config.seed + (1000 if config.init else 0)  # a guided round draws fresh prompts
    pool = policy_pool(dllm, config.policy_examples, seed=round_seed)
    held_out = policy_pool(dllm, config.eval_examples, seed=10_001 + config.seed)
    guided_held_out = []
    if config.guided_examples:
        pool += guided_pool(dllm, inputs.scorer, config.guided_examples, seed=round_seed + 1)
        guided_held_out = guided_pool(dllm, inputs.scorer, config.eval_examples // 4, seed=20_001 + config.seed)
    generation_seconds = time.time() - start
    print(f"{len(pool)} + {len(held_out) + len(guided_held_out)} generations in {generation_seconds:.0f} s",
          flush=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, config.steps)
    model.train()
    for step in range(config.steps):
        batch = training_batch(dllm, pool, config.batch_size, rng)
        logits = model(*inputs(batch)).logits[:, 0]
        loss = F.binary_cross_entropy_with_logits(logits, torch.tensor([e.target for e in batch], device=logits.device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % 250 == 0:
            print(f"step {step} loss {loss.item():.4f} ({time.time() - start:.0f} s)", flush=True)
    model.eval()
    report = {"config": asdict(config), "parameters": sum(p.numel() for p in model.parameters()),
              "wall_seconds": round(time.time() - start), "generation_seconds": round(generation_seconds),
              "final_loss": round(loss.item(), 4), "held_out": agreement_on(model, inputs, held_out),
              "train_pool": agreement_on(model, inputs, pool[:len(held_out)])}
    if guided_held_out:
        report["held_out_guided_by_init"] = agreement_on(model, inputs, guided_held_out)
    if config.init:
        report["init_report"] = json.loads((Path(config.init) / "training_report.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_text_atomic(out / "training_report.json", json.dumps(report, indent=2))
    return report


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--threads", type=integer(1), default=2)
    defaults = RewardTrainConfig()
    for field in ("steps", "batch_size", "hidden_size", "layers", "policy_examples", "eval_examples",
                  "guided_examples", "seed"):
        parser.add_argument("--" + field.replace("_", "-"), type=int, default=getattr(defaults, field))
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--init", type=str, default=None, help="a reward folder to continue training")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        check_output_dir(args.out, "--out")
        config = RewardTrainConfig(**{k: v for k, v in vars(args).items() if k not in ("out", "threads")})
    except (UsageError, ValueError, FileNotFoundError) as err:
        parser.error(str(err))
    torch.set_num_threads(args.threads)
    print(json.dumps(train(config, args.out), indent=2))


if __name__ == "__main__":
    main()
