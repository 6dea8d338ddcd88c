"""Golden traces from the official samplers, checked on every CI run (spec SQ1.8, SQ2.6, FD4, FD8).

The recorder runs the OFFICIAL sampler files with their OWN official modelling code on tiny checkpoints in the
official layouts, written by veridec's writer, and stores settings, seeds, prompts, outputs, forward counts and
per-step commits in ``tests/golden/golden.json``. ``tests/test_golden.py`` replays every case with veridec's
decoders (no network, no official code) and asserts tokens, forward counts and steps exactly.

    python -m tools.golden.record record --llada LLaDA/generate.py \\
        --fastdllm Fast-dLLM@f6b35ec/llada --fastdllm Fast-dLLM@24cc59e/llada \\
        --dream Fast-dLLM@24cc59e/dream --provenance provenance.json --out tests/golden/

- ``--llada``: ML-GSAI/LLaDA ``generate.py``; it runs with the LLaDA modelling of the first ``--fastdllm``
  folder (Fast-dLLM ships the official LLaDA modelling with its K/V cache additions).
- ``--fastdllm`` (repeatable): a Fast-dLLM ``llada/`` folder (``generate.py`` and ``model/``). A file without
  ``factor`` is the June 2025 loop (commit 24cc59e, "legacy"), one with it the current loop.
- ``--dream``: a Fast-dLLM ``dream/`` folder (``model/modeling_dream.py``, ``model/generation_utils.py``).
- ``--provenance``: JSON mapping each local file (relative to the JSON's folder) to its upstream
  ``repository``, ``commit`` and ``path``; recorded with each file's sha256.

The official code needs transformers 4.46 (Dream's generation_utils fails under 5.x); the test does not.
Nothing official is copied into the repository: files are read from where they lie, at record time only.

Numerics: checkpoints are float64, but both official modellings compute RMSNorm in float32 (and LLaDA's
rotary embedding with ``rope_full_precision``), so official and veridec logits differ by ~1e-6, measured per
checkpoint and recorded (``numerics``). Every decision of a case whose outcome rounding could change (token
argmax, the k-th place of a selection, a threshold or factor comparison, Dream's top-p / top-k cuts) is probed
on veridec's side at record time; a case whose smallest margin is within ``SAFETY`` times the measured error is
recorded as ``near_tie`` and not asserted token for token. Multinomial draws (Dream at temperature > 0,
``alg_temp``) have no margin to probe: they are asserted, and were equal at record time.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import io
import json
import math
import random
import shutil
import sys
import tempfile
import time
import traceback
import types
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from unittest import mock

import torch

from veridec.files import write_text_atomic
from veridec.models import SpecialTokens, load_pretrained

from .checkpoints import (CHECKPOINT_DIR, CHECKPOINTS, GOLDEN_FILE, LLADA_8B_VOCAB, TEXT_TOKENS, content_sha256,
                          write_checkpoint)
from .replay import CanvasLog, case_inputs, defect_kind, describe, ignores_padding, run_veridec, same_run, summary

FORMAT = 1
FORWARD_CAP = 200  # official forwards per case before the recorder stops it ("capped"): it never hangs
SAFETY = 8.0  # a decision counts as decided when its margin exceeds SAFETY x the measured rounding error
GRID_SEED = 20250627

# ------------------------------------------------------------------------------------------------ cases
LLADA_SPLITS = [(4, 4, 4), (4, 4, 2), (4, 2, 4), (4, 2, 2), (6, 3, 6), (6, 3, 2), (6, 2, 3), (6, 6, 3),
                (6, 1, 6), (8, 4, 8), (8, 4, 4), (8, 2, 4), (5, 5, 5), (9, 3, 6)]  # (gen, block, steps)
FASTDLLM_SPLITS = [(4, 4, 4), (4, 4, 2), (4, 4, 1), (4, 2, 2), (4, 2, 4), (6, 3, 2), (6, 3, 6), (6, 2, 6),
                   (8, 4, 2), (8, 4, 4), (8, 8, 4), (6, 6, 6), (6, 2, 3)]
THRESHOLDS = (0.05, 0.2, 0.5, 0.9)
FACTORS = (0.5, 1.0, 2.0, 4.0)
DREAM_ALGS = ("origin", "maskgit_plus", "topk_margin", "entropy")


def _prompt(rng: random.Random, special: SpecialTokens, batch: int, length: int, *, padded: bool = False,
            infill: int = 0, vocab_hi: int = TEXT_TOKENS, equal_masks: bool = True) -> tuple[list, list | None]:
    """Prompt rows [B][P] (left-padded with pad_id when ``padded``, every row keeping >= 2 real tokens) and
    their attention mask (None when not padded). ``infill`` masks per row inside the real part, never on its
    first real token (Dream scores it with its own position there, the official code with the pad's)."""
    def token():
        t = rng.randrange(vocab_hi)
        while t in (special.mask_id, special.eos_id, special.eot_id, special.pad_id):
            t = rng.randrange(vocab_hi)
        return t

    rows, masks = [], []
    for r in range(batch):
        real = length
        if padded and length > 2:  # the first row is padded for sure, the others may be
            real = rng.randint(2, length - 1) if r == 0 else rng.randint(2, length)
        row = [token() for _ in range(real)]
        count = infill if equal_masks else rng.randint(0, infill)
        for p in rng.sample(range(1, real), min(count, real - 1)):
            row[p] = special.mask_id
        rows.append([special.pad_id] * (length - real) + row)
        masks.append([0] * (length - real) + [1] * real)
    return rows, (masks if padded else None)


def _case(sampler: str, variant: str, checkpoint: str, settings: dict, prompt, mask, seed: int, **extra) -> dict:
    return dict(sampler=sampler, variant=variant, checkpoint=checkpoint, settings=settings, prompt=prompt,
                attention_mask=mask, seed=seed, **extra)


def llada_cases(rng: random.Random, models: dict) -> list[dict]:
    """ML-GSAI/LLaDA ``generate``: temperature 0 / 0.5 / 1 x both remasking modes x cfg 0 / 1.5 x {one row,
    two rows, left-padded rows, masks in the prompt}, three times with other block / step splits; the EOS/EoT
    flags on the 126464-token model; the model that proposes the mask token; cfg > 0 without an attention mask."""
    small = models["llada"].special
    return (_llada_grid(rng, small) + _llada_eos_flags(rng, models["llada-126k"].special)
            + _llada_proposes_mask(rng, models["llada-proposes-mask"].special) + _llada_cfg_without_mask(rng, small))


def _llada_grid(rng: random.Random, small: SpecialTokens) -> list[dict]:
    cases = []
    for rep in range(3):
        for temperature in (0.0, 0.5, 1.0):
            for remasking in ("low_confidence", "random"):
                for cfg in (0.0, 1.5):
                    for shape in ("one", "two", "padded", "infill"):
                        gen, block, steps = rng.choice(LLADA_SPLITS)
                        batch = {"one": 1, "two": 2, "padded": rng.choice([2, 3]), "infill": rng.choice([1, 2])}[shape]
                        prompt, mask = _prompt(rng, small, batch, rng.randint(2, 6), padded=shape == "padded",
                                               infill=rng.randint(1, 2) if shape == "infill" else 0)
                        if cfg > 0 and mask is None:  # the official code needs a mask under cfg (NameError)
                            mask = [[1] * len(prompt[0]) for _ in prompt]
                        settings = {"steps": steps, "gen_length": gen, "block_length": block,
                                    "temperature": temperature, "cfg_scale": cfg, "remasking": remasking,
                                    "mask_id": small.mask_id}
                        cases.append(_case("llada", "generate", "llada", settings, prompt, mask,
                                           rng.randrange(2**31), shape=shape))
    return cases


def _llada_eos_flags(rng: random.Random, big: SpecialTokens) -> list[dict]:
    cases = []
    for temperature in (0.0, 0.0, 0.7, 1.0):
        for remasking in ("low_confidence", "random"):
            for eos in (False, True):
                for eot in (False, True):
                    gen, block, steps = rng.choice([(4, 4, 4), (4, 2, 4), (4, 4, 2), (6, 3, 6), (3, 3, 3)])
                    prompt, mask = _prompt(rng, big, 1, rng.randint(2, 4), vocab_hi=LLADA_8B_VOCAB,
                                           infill=rng.choice([0, 0, 1]))
                    cfg = 1.5 if (eos and not eot and temperature == 0) else 0.0
                    if cfg:
                        mask = [[1] * len(prompt[0])]
                    settings = {"steps": steps, "gen_length": gen, "block_length": block, "temperature": temperature,
                                "cfg_scale": cfg, "remasking": remasking, "mask_id": big.mask_id,
                                "logits_eos_inf": eos, "confidence_eos_eot_inf": eot}
                    cases.append(_case("llada", "generate", "llada-126k", settings, prompt, mask,
                                       rng.randrange(2**31), shape="eos-flags"))
    return cases


def _llada_proposes_mask(rng: random.Random, raw: SpecialTokens) -> list[dict]:
    cases = []
    for temperature in (0.0, 0.0, 0.0, 0.7, 0.7, 1.0):
        gen, block, steps = rng.choice(LLADA_SPLITS)
        prompt, _ = _prompt(rng, raw, rng.choice([1, 2]), rng.randint(2, 6))
        settings = {"steps": steps, "gen_length": gen, "block_length": block, "temperature": temperature,
                    "cfg_scale": 0.0, "remasking": "low_confidence", "mask_id": raw.mask_id}
        cases.append(_case("llada", "generate", "llada-proposes-mask", settings, prompt, None, rng.randrange(2**31),
                           shape="proposes-mask"))
    return cases


def _llada_cfg_without_mask(rng: random.Random, small: SpecialTokens) -> list[dict]:
    cases = []
    for temperature in (0.0, 0.5):  # upstream defect: cfg_scale > 0 without attention_mask -> NameError
        prompt, _ = _prompt(rng, small, 1, 4)
        settings = {"steps": 4, "gen_length": 4, "block_length": 4, "temperature": temperature, "cfg_scale": 1.5,
                    "remasking": "low_confidence", "mask_id": small.mask_id}
        cases.append(_case("llada", "generate", "llada", settings, prompt, None, rng.randrange(2**31),
                           shape="cfg-no-mask"))
    return cases


def fastdllm_cases(rng: random.Random, models: dict, loops: tuple[str, ...]) -> list[dict]:
    """NVlabs/Fast-dLLM ``generate`` / ``generate_with_prefix_cache`` / ``generate_with_dual_cache``, for each
    loop (current, legacy): quota, thresholds 0.05-0.9 and (current only) factors 0.5-4 x temperature 0 / 0.7 x
    both remasking modes, twice with other splits (two rows where upstream supports them: the current file
    without cache or with the prefix cache); plus the upstream defects: dual cache at batch 2, the legacy file
    at batch 2, quota with one step per block (legacy, cached), and the model that proposes the mask token (quota's
    IndexError, threshold's endless loop)."""
    cases = []
    special, raw = models["llada"].special, models["llada-proposes-mask"].special
    for loop in loops:
        modes = [{}] + [{"threshold": t} for t in THRESHOLDS] + \
            ([{"factor": f} for f in FACTORS] if loop == "current" else [])
        for cache in ("none", "prefix", "dual"):
            cases += _fastdllm_grid(rng, special, loop, cache, modes)
            cases += _fastdllm_defects(rng, special, loop, cache)
            cases += _fastdllm_proposes_mask(rng, raw, loop, cache)
    return cases


def _fastdllm_settings(loop: str, mode: dict, **settings) -> dict:
    """A Fast-dLLM case's settings: the mode's threshold, and its factor where the loop has one (current)."""
    return dict(settings, threshold=mode.get("threshold"),
                **({"factor": mode.get("factor")} if loop == "current" else {}))


def _fastdllm_grid(rng: random.Random, special: SpecialTokens, loop: str, cache: str, modes: list) -> list[dict]:
    cases = []
    for rep in range(2):
        for mode in modes:
            for temperature in (0.0, 0.7):
                for remasking in ("low_confidence", "random"):
                    gen, block, steps = rng.choice(FASTDLLM_SPLITS)
                    batch = rng.choice([1, 2]) if loop == "current" and cache != "dual" else 1
                    prompt, _ = _prompt(rng, special, batch, rng.randint(1, 6) if batch == 1 else rng.randint(2, 6))
                    settings = _fastdllm_settings(loop, mode, steps=steps, gen_length=gen, block_length=block,
                                                  temperature=temperature, remasking=remasking,
                                                  mask_id=special.mask_id)
                    cases.append(_case("fastdllm", f"{loop}/{cache}", "llada", settings, prompt, None,
                                       rng.randrange(2**31), shape="batch" if batch > 1 else "one"))
    return cases


def _fastdllm_defects(rng: random.Random, special: SpecialTokens, loop: str, cache: str) -> list[dict]:
    defects = []
    if cache == "dual" and loop == "current":
        defects += [("batch2", m) for m in ({}, {"threshold": 0.5}, {"factor": 1.0})]
    if loop == "legacy":
        defects.append(("batch2", {}))
        if cache != "none":
            defects += [("one-step-per-block", {}), ("one-step-per-block", {})]
    cases = []
    for shape, mode in defects:
        gen, block, steps = (4, 2, 2) if shape == "one-step-per-block" else (4, 2, 4)
        prompt, _ = _prompt(rng, special, 2 if shape == "batch2" else 1, 4)
        settings = _fastdllm_settings(loop, mode, steps=steps, gen_length=gen, block_length=block, temperature=0.0,
                                      remasking="low_confidence", mask_id=special.mask_id)
        cases.append(_case("fastdllm", f"{loop}/{cache}", "llada", settings, prompt, None, rng.randrange(2**31),
                           shape=shape))
    return cases


def _fastdllm_proposes_mask(rng: random.Random, raw: SpecialTokens, loop: str, cache: str) -> list[dict]:
    cases = []
    for mode in ({}, {"threshold": 0.9}, {"threshold": 0.5}) + (({"factor": 1.0},) if loop == "current" else ()):
        gen, block, steps = rng.choice([(8, 8, 4), (8, 4, 4), (6, 6, 6), (8, 8, 8)])
        prompt, _ = _prompt(rng, raw, 1, rng.randint(2, 6))
        settings = _fastdllm_settings(loop, mode, steps=steps, gen_length=gen, block_length=block, temperature=0.0,
                                      remasking="low_confidence", mask_id=raw.mask_id)
        cases.append(_case("fastdllm", f"{loop}/{cache}", "llada-proposes-mask", settings, prompt, None,
                           rng.randrange(2**31), shape="proposes-mask"))
    return cases


def dream_cases(rng: random.Random, models: dict) -> list[dict]:
    """Dream ``diffusion_generate`` (Fast-dLLM's per-row revision): every alg x temperature 0 / 0.7 x top_p
    None / 0.9 x top_k None / 5 x alg_temp None / 0.5 (not origin), one row and two left-padded rows; masks in
    the prompt; rows with unequal mask counts (the official code re-masks, ours clamps: SQ2.4)."""
    cases = []
    special = models["dream"].special
    for alg in DREAM_ALGS:
        for temperature in (0.0, 0.7):
            for top_p in (None, 0.9):
                for top_k in (None, 5):
                    for alg_temp in ((None,) if alg == "origin" else (None, 0.5)):
                        for shape in ("one", "padded"):
                            new = rng.randint(2, 8)
                            prompt, mask = _prompt(rng, special, 1 if shape == "one" else 2, rng.randint(2, 6),
                                                   padded=shape == "padded")
                            settings = {"max_new_tokens": new, "steps": rng.randint(1, new + 2), "alg": alg,
                                        "alg_temp": alg_temp, "temperature": temperature, "top_p": top_p,
                                        "top_k": top_k, "mask_token_id": special.mask_id,
                                        "pad_token_id": special.pad_id}
                            cases.append(_case("dream", "diffusion_generate", "dream", settings, prompt, mask,
                                               rng.randrange(2**31), shape=shape))
    for i in range(16):
        alg = DREAM_ALGS[i % 4]
        new = rng.randint(2, 6)
        prompt, mask = _prompt(rng, special, rng.choice([1, 2]), rng.randint(3, 6), padded=i % 2 == 1, infill=2)
        settings = {"max_new_tokens": new, "steps": rng.randint(1, new + 3), "alg": alg, "alg_temp": None,
                    "temperature": rng.choice([0.0, 0.7]), "top_p": None, "top_k": None,
                    "mask_token_id": special.mask_id, "pad_token_id": special.pad_id}
        cases.append(_case("dream", "diffusion_generate", "dream", settings, prompt, mask, rng.randrange(2**31),
                           shape="infill"))
    for i in range(8):  # unequal mask counts per row, few steps: the last step's k exceeds a row's masks
        alg = DREAM_ALGS[1 + i % 3]
        prompt, _ = _prompt(rng, special, 2, 6)
        prompt[0][2:5] = [special.mask_id] * 3
        new = rng.randint(1, 3)
        settings = {"max_new_tokens": new, "steps": rng.choice([1, 2]), "alg": alg, "alg_temp": None,
                    "temperature": rng.choice([0.0, 0.7]), "top_p": None, "top_k": None,
                    "mask_token_id": special.mask_id, "pad_token_id": special.pad_id}
        cases.append(_case("dream", "diffusion_generate", "dream", settings, prompt, None, rng.randrange(2**31),
                           shape="unequal-masks"))
    return cases


def grid(models: dict, loops: tuple[str, ...] = ("current", "legacy")) -> list[dict]:
    rng = random.Random(GRID_SEED)
    return llada_cases(rng, models) + fastdllm_cases(rng, models, loops) + dream_cases(rng, models)


HUNTS = (  # (mode, temperature, what the case must show)
    ({"threshold": 0.9}, 0.0, "capped"), ({"threshold": 0.5}, 0.0, "capped"), ({}, 0.0, "IndexError"),
    ({"threshold": 0.9}, 1.0, "upstream completes after more forwards than masks"),
)


def hunt_cases(run_both, models: dict, loops: tuple[str, ...], attempts: int = 100) -> list[dict]:
    """Cases that need a particular draw, on llada-proposes-mask, per Fast-dLLM loop and cache: at temperature
    0 a threshold run that never completes (the top-ranked candidate proposes the mask token, so it stays
    masked and every later step repeats the same forward: "capped" at FORWARD_CAP) and a quota run whose
    block outlives its schedule (IndexError); at temperature 1 a threshold run that upstream completes after
    more forwards than it has masks (mask proposals waste steps, later draws move on: veridec's step budget
    for sampled decodes must let it finish, spec/parallel.md P11). Candidates
    come from a fixed seed; the first that shows what is wanted is kept (``run_both(case) -> (official,
    veridec)`` outcomes)."""
    special = models["llada-proposes-mask"].special
    found = []
    for loop in loops:
        for cache in ("none", "prefix", "dual"):
            for index, (mode, temperature, wanted) in enumerate(HUNTS):
                rng = random.Random(f"{GRID_SEED}/{loop}/{cache}/{index}")
                for _ in range(attempts):
                    gen = rng.choice([8, 12, 16])
                    block = rng.choice([gen, gen // 2])
                    steps = (gen // block) * rng.choice([2, 4])
                    prompt, _ = _prompt(rng, special, 1, rng.randint(2, 6))
                    settings = dict(steps=steps, gen_length=gen, block_length=block, temperature=temperature,
                                    remasking="low_confidence", mask_id=special.mask_id,
                                    threshold=mode.get("threshold"),
                                    **({"factor": None} if loop == "current" else {}))
                    case = _case("fastdllm", f"{loop}/{cache}", "llada-proposes-mask", settings, prompt, None,
                                 rng.randrange(2**31), shape=f"hunt-{wanted.split(',')[0].replace(' ', '-')}")
                    official, veridec = run_both(case)
                    if temperature == 0 and (official["status"] == wanted or
                                             official.get("error", "").startswith(wanted)) or \
                            temperature > 0 and official["status"] == "ok" and official["nfe"] > gen:
                        found.append(case)
                        break
    return found


def assign_ids(cases: list[dict]) -> list[dict]:
    counters: dict[str, int] = {}
    for case in cases:
        key = f"{case['sampler']}/{case['variant']}"
        counters[key] = counters.get(key, 0) + 1
        case["id"] = f"{key}/{counters[key] - 1:03d}"
    return cases


# ======================================================================== record time (official code)
class ForwardCap(Exception):
    """Raised by the recorder's hook when an official run exceeds FORWARD_CAP forwards."""


class Capture(CanvasLog):
    """A forward pre-hook on the official model: counts calls, raises ForwardCap past ``cap``, and logs the
    canvas each call saw (the prefix cache feeds x[:, s:], the dual cache x[:, s:e] with ``replace_position``).
    """

    def __init__(self, model, batch: int, length: int, cap: int = FORWARD_CAP):
        super().__init__(batch, length)
        self.cap = cap
        self.handle = model.register_forward_pre_hook(self.hook, with_kwargs=True)

    def hook(self, module, args, kwargs):
        if len(self.canvases) >= self.cap:
            raise ForwardCap(f"more than {self.cap} forwards")
        x = args[0] if args else kwargs["input_ids"]
        if x.shape[1] == self.length:
            self.full(x)
            return
        replace = kwargs.get("replace_position")
        offset = int(replace[0].nonzero()[0]) if replace is not None else self.length - x.shape[1]
        self.window(x, torch.arange(offset, offset + x.shape[1], device=x.device).expand(x.shape[0], -1))
        return


@dataclass
class Official:
    """The official modules, loaded from local files: ML-GSAI/LLaDA generate.py, Fast-dLLM's generate.py per
    loop ("current", "legacy") with its LLaDA modelling, Fast-dLLM's Dream modelling + generation_utils."""

    llada_generate: types.ModuleType
    fastdllm: dict
    llada_model_class: type
    dream_model_class: type
    dream_config_class: type
    files: dict  # role -> local path of each official file used

    @classmethod
    def load(cls, llada_file: Path, fastdllm_dirs: list[Path], dream_dir: Path) -> Official:
        files = {"LLaDA generate.py": llada_file}  # role -> local path
        generate = _load_file("veridec_official_llada_generate", llada_file)
        fastdllm, model_class = {}, None
        for i, folder in enumerate(fastdllm_dirs):
            package = _package(f"veridec_official_fastdllm_{i}", folder)
            model_package = importlib.import_module(f"{package.__name__}.model")
            modeling = importlib.import_module(f"{package.__name__}.model.modeling_llada")
            saved = {k: sys.modules.get(k) for k in ("model", "model.modeling_llada")}
            sys.modules["model"], sys.modules["model.modeling_llada"] = model_package, modeling  # legacy import
            try:
                module = importlib.import_module(f"{package.__name__}.generate")
            finally:
                for k, v in saved.items():
                    sys.modules.pop(k, None) if v is None else sys.modules.__setitem__(k, v)
            loop = "current" if "factor" in inspect.signature(module.generate).parameters else "legacy"
            if loop in fastdllm:
                raise ValueError(f"two {loop} Fast-dLLM files given")
            fastdllm[loop] = module
            for name in ("generate.py", "model/__init__.py", "model/configuration_llada.py",
                         "model/modeling_llada.py"):
                files[f"Fast-dLLM {loop} llada/{name}"] = folder / name
            if model_class is None:
                model_class = modeling.LLaDAModelLM
                files["LLaDA modelling for LLaDA generate.py"] = folder / "model/modeling_llada.py"
        model_dir = dream_dir / "model" if (dream_dir / "model").is_dir() else dream_dir
        dream = _package("veridec_official_dream", model_dir)
        modeling_dream = importlib.import_module(f"{dream.__name__}.modeling_dream")
        utils = importlib.import_module(f"{dream.__name__}.generation_utils")
        for name in ("__init__.py", "configuration_dream.py", "modeling_dream.py", "generation_utils.py"):
            files[f"Dream model/{name}"] = model_dir / name
        return cls(generate, fastdllm, model_class, modeling_dream.DreamModel, utils.DreamGenerationConfig,
                   {role: Path(path) for role, path in files.items()})

    def load_model(self, layout: str, folder: Path):
        cls = self.llada_model_class if layout == "llada" else self.dream_model_class
        with _quiet():
            return cls.from_pretrained(str(folder), torch_dtype=torch.float64).eval()

    def run(self, case: dict, model) -> dict:
        """One case on the official code -> {status, canvas, nfe, forwards, steps}."""
        prompt, mask = case_inputs(case)
        settings = dict(case["settings"])
        total = prompt.shape[1] + settings.get("gen_length", settings.get("max_new_tokens", 0))
        capture = Capture(model, prompt.shape[0], total)
        torch.manual_seed(case["seed"])
        out, nfe, status, error = None, None, "ok", None
        try:
            with _quiet(), torch.no_grad():
                if case["sampler"] == "llada":
                    out = self.llada_generate.generate(model, prompt, mask, **settings)
                    nfe = len(capture.canvases)
                elif case["sampler"] == "fastdllm":
                    loop, cache = case["variant"].split("/")
                    name = {"none": "generate", "prefix": "generate_with_prefix_cache",
                            "dual": "generate_with_dual_cache"}[cache]
                    out, nfe = getattr(self.fastdllm[loop], name)(model, prompt, **settings)
                else:
                    config = self.dream_config_class(**settings)
                    out = model.diffusion_generate(prompt, generation_config=config, attention_mask=mask)
                    nfe = len(capture.canvases)
        except ForwardCap as err:
            status, error = "capped", str(err)
        except Exception as err:  # noqa: BLE001 -- an upstream defect is recorded, whatever it raises
            status, error = "error", describe(err)
            error += f" [at {_where(err)}]"
        finally:
            capture.handle.remove()
        result = {"status": status, "forwards": len(capture.canvases),
                  "steps": capture.commits(out if status == "ok" else None)}
        if status == "ok":
            result.update(canvas=out.tolist(), nfe=int(nfe))
        else:
            result["error"] = error
        return result


def _where(err: BaseException) -> str:
    frames = traceback.extract_tb(err.__traceback__)
    frame = frames[-1] if frames else None
    return f"{Path(frame.filename).name}:{frame.lineno}" if frame else "?"  # no upstream source text


@contextlib.contextmanager
def _quiet():
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _load_file(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _package(name: str, folder: Path) -> types.ModuleType:
    """A package named ``name`` over ``folder`` (which need not have an __init__.py), so that relative
    imports inside the official files resolve within it (the current Fast-dLLM generate.py imports
    ``.model.modeling_llada``)."""
    init = folder / "__init__.py"
    if init.is_file():
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(folder)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        module = types.ModuleType(name)
        module.__path__ = [str(folder)]
        module.__spec__ = importlib.util.spec_from_loader(name, None, is_package=True)
        module.__spec__.submodule_search_locations = [str(folder)]
        sys.modules[name] = module
    return module


# ------------------------------------------------------------------------------- measured rounding error
def measure_error(official, ours, layout: str, special: SpecialTokens, vocab_hi: int, seed: int = 0) -> dict:
    """Max |logit difference| between the official modelling and veridec's on random canvases: full
    forwards (and, for LLaDA, the prefix- and dual-cache forwards of Fast-dLLM's protocol against veridec's
    ``forward_cached``)."""
    gen = torch.Generator().manual_seed(seed)
    worst = {"full": 0.0}
    with torch.no_grad():
        for trial in range(24):
            batch, length = 1 + trial % 3, 4 + trial % 12
            x = torch.randint(0, vocab_hi, (batch, length), generator=gen, device=gen.device)
            x[torch.rand(batch, length, generator=gen, device=gen.device) < 0.4] = special.mask_id
            theirs = official(x).logits if layout == "llada" else _dream_aligned(official(x, "full", None).logits)
            worst["full"] = max(worst["full"], float((theirs - ours(x).logits).abs().max()))
            if layout != "llada":
                continue
            start = int(torch.randint(1, length - 1, (1,), generator=gen, device=gen.device))
            end = min(length, start + 1 + int(torch.randint(0, length - start, (1,), generator=gen, device=gen.device)))
            full = official(x, use_cache=True)
            prefix = [tuple(t[:, :, :start] for t in layer) for layer in full.past_key_values]
            theirs = official(x[:, start:], past_key_values=prefix, use_cache=True).logits
            _, cache = ours.prefill(x)
            positions = torch.arange(start, length, device=x.device).expand(batch, -1)
            mine = ours.forward_cached(x[:, start:], positions, cache).logits
            worst["prefix"] = max(worst.get("prefix", 0.0), float((theirs - mine).abs().max()))
            replace = torch.zeros_like(x, dtype=torch.bool)
            replace[:, start:end] = True
            full = official(x, use_cache=True)
            if batch == 1:  # the official dual cache crashes at batch > 1
                theirs = official(x[:, start:end], past_key_values=full.past_key_values, use_cache=True,
                                  replace_position=replace).logits
                _, cache = ours.prefill(x)
                positions = torch.arange(start, end, device=x.device).expand(batch, -1)
                mine = ours.forward_cached(x[:, start:end], positions, cache).logits
                worst["dual"] = max(worst.get("dual", 0.0), float((theirs - mine).abs().max()))
    return worst


def _dream_aligned(raw: torch.Tensor) -> torch.Tensor:
    return torch.cat([raw[:, :1], raw[:, :-1]], dim=1)


# ------------------------------------------------------------------------------------ decision margins
def saturated_values(dtype: torch.dtype) -> set[float]:
    """Confidences a saturated (one-hot) distribution gives, bit for bit the same on both sides whatever the
    rounding elsewhere: 0 (an EOS/EoT proposal under confidence_eos_eot_inf), 1 (p or top1 - top2 of a
    one-hot), and Dream's negative entropy of a one-hot, 1 * log(1 + 1e-10). Ties among them are exact on
    both sides and resolved by torch.topk alike (ties="torch"), so they are asserted."""
    one_hot = torch.tensor([1.0, 0.0], dtype=dtype, device="cpu")
    return {0.0, 1.0, float(torch.sum(one_hot * torch.log(one_hot + 1e-10)))}


class MarginProbe:
    """Record-time probe of every decision veridec's rules take during one decode, as margins relative to
    their tolerance (``ratio`` < 1: a rounding of the measured size could flip it). Wraps the rule steps the
    decoders call (``llada_step``, ``parallel_step``, ``dream_step``) and reads their inputs and results."""

    def __init__(self, tol_logit: float):
        self.tol_logit, self.tol_conf = tol_logit, 2 * tol_logit
        self.ratio, self.worst, self.exact_ties, self.unprobed = math.inf, None, 0, set()

    def note(self, kind: str, margin: float, tol: float) -> None:
        if kind.endswith("exact tie"):
            self.exact_ties += 1
            return
        ratio = margin / tol
        if ratio < self.ratio:
            self.ratio, self.worst = ratio, (kind, margin)

    @contextlib.contextmanager
    def patched(self):
        import veridec.optimized.parallel as optimized_parallel
        import veridec.reference.dream as reference_dream
        import veridec.reference.llada as reference_llada
        import veridec.reference.parallel as reference_parallel

        with contextlib.ExitStack() as stack:
            for module, name, wrap in ((reference_llada, "llada_step", self.llada_step),
                                       (reference_parallel, "parallel_step", self.parallel_step),
                                       (optimized_parallel, "parallel_step", self.parallel_step),
                                       (reference_dream, "dream_step", self.dream_step)):
                stack.enter_context(mock.patch.object(module, name, wrap(getattr(module, name))))
            yield self

    # -- helpers
    def tokens(self, choice_logits: torch.Tensor, candidates: torch.Tensor) -> None:
        if candidates.any():
            top2 = choice_logits[candidates].double().topk(2, dim=-1).values
            self.note("token argmax", float((top2[:, 0] - top2[:, 1]).min()), self.tol_logit)

    def selection(self, confidence: torch.Tensor, candidates: torch.Tensor, counts: list[int], tol: float) -> None:
        for row, k in enumerate(counts):
            c = confidence[row][candidates[row]].sort(descending=True).values
            if 0 < k < len(c):
                saturated = c[k - 1] == c[k] and float(c[k]) in saturated_values(c.dtype)
                self.note("k-th place exact tie" if saturated else "k-th place", float(c[k - 1] - c[k]), tol)

    # -- wrappers
    def llada_step(self, step):
        def wrapped(logits, x, *, block_end, num_transfer, params, special, mask_id, generator=None):
            result = step(logits, x, block_end=block_end, num_transfer=num_transfer, params=params, special=special,
                          mask_id=mask_id, generator=generator)
            candidates = (x == mask_id) & (torch.arange(x.shape[1], device=x.device) < block_end)[None]
            self.tokens(result.choice_logits, candidates)
            if params.remasking == "low_confidence":
                self.selection(result.confidence, candidates, num_transfer.tolist(), self.tol_conf)
            return result
        return wrapped

    def parallel_step(self, step):
        from veridec.rules.parallel import Factor, Threshold

        def wrapped(rule, logits, x, candidates, **kw):
            result = step(rule, logits, x, candidates, **kw)
            self.tokens(result.choice_logits, candidates)
            if kw.get("remasking", "low_confidence") != "low_confidence":
                return result
            conf = result.view.confidence
            self.selection(conf, candidates, [len(o) for o in result.order], self.tol_conf)
            for row in range(conf.shape[0]):
                c = conf[row][candidates[row]].sort(descending=True).values
                if isinstance(rule, Threshold) and len(c) > 1:
                    self.note("threshold", float((c[1:] - rule.threshold).abs().min()), self.tol_conf)
                if isinstance(rule, Factor) and len(c) > 1:
                    n = torch.arange(2, len(c) + 1, dtype=torch.float64, device=c.device)
                    levels = 1 - torch.full_like(n, rule.factor) / (n + 1)  # as the rule evaluates them
                    self.note("factor", float((c[1:] - levels).abs().min()), self.tol_conf)
            return result
        return wrapped

    def dream_step(self, original):
        def wrapped(logits, x, *, step, timesteps, params, mask_id, generator=None):
            result = original(logits, x, step=step, timesteps=timesteps, params=params, mask_id=mask_id,
                              generator=generator)
            candidates = x == mask_id
            if not candidates.any():
                return result
            scaled = logits[candidates].double() / (params.temperature or 1.0)
            tol = self.tol_logit / (params.temperature or 1.0)
            if params.temperature == 0:
                self.tokens(logits, candidates)
            else:
                self.unprobed.add("multinomial token draws")
            if params.top_k is not None and params.top_k < scaled.shape[-1]:
                top = scaled.topk(params.top_k + 1, dim=-1).values
                self.note("top_k cut", float((top[:, -2] - top[:, -1]).min()), tol)
            if params.top_p is not None and params.top_p < 1:
                cumulative = scaled.softmax(-1).sort(descending=True).values.cumsum(-1)
                self.note("top_p cut", float((cumulative - params.top_p).abs().min()), self.tol_conf)
            if params.alg == "origin":
                return result
            if params.alg_temp:
                self.unprobed.add("alg_temp multinomial selection")
                return result
            tol_conf = self.tol_conf * {"maskgit_plus": 1, "topk_margin": 2,
                                        "entropy": 2 + math.log(logits.shape[-1])}[params.alg]
            self.selection(result.confidence, candidates, [len(o) for o in result.order], tol_conf)
            return result
        return wrapped


# ------------------------------------------------------------------------------------------- recording
def classify(case: dict, official: dict, veridec: dict, probe: MarginProbe, extra: dict) -> dict:
    """Decide what the test asserts for a case (``expect``) and keep what it needs."""
    record = {"official": official}
    record["margin"] = {"ratio": None if probe.ratio == math.inf else round(probe.ratio, 3),
                        "worst": probe.worst and [probe.worst[0], float(f"{probe.worst[1]:.3g}")],
                        "exact_ties": probe.exact_ties, "unprobed": sorted(probe.unprobed)}
    if ignores_padding(case) and same_run(official, veridec):  # ``veridec`` ran without the attention mask
        record["expect"] = "padding_ignored_upstream"
        record["veridec"] = extra["padded"]
        record["differs"] = extra["padded"].get("canvas") != official.get("canvas")
        return record
    if official["status"] != "ok":
        record["expect"] = "upstream_defect"
        record["defect"] = defect_kind(official)
        record["veridec"] = veridec
        common = min(len(official["steps"]), len(veridec["steps"]))
        record["prefix_agrees"] = official["steps"][:common] == veridec["steps"][:common]
        record["common_steps"] = common
        return record
    if same_run(official, veridec):
        record["expect"] = "near_tie" if probe.ratio < 1 else "equal"
        if record["expect"] == "near_tie":
            record["veridec"] = veridec
        return record
    record["veridec"] = veridec
    if case.get("shape") == "unequal-masks" and _remasked(case, official):
        record["expect"] = "row_clamp"
    elif veridec["status"] == "error":  # veridec stops where upstream completes: a finding, to be resolved
        record["expect"] = "disagreement"
        record["cause"] = f"veridec raised: {veridec['error']}"
        common = len(veridec["steps"])
        record["prefix_agrees"], record["common_steps"] = official["steps"][:common] == veridec["steps"], common
    else:
        record["expect"] = "near_tie" if probe.ratio < 1 else "disagreement"
    return record


def _remasked(case: dict, official: dict) -> bool:
    """The official Dream loop wrote the mask token over a non-mask position (SQ2.4's deviation)."""
    mask_id = case["settings"]["mask_token_id"]
    for step in official["steps"]:
        if any(tok == mask_id for _, _, tok in step):
            return True
    return False


def record(official: Official, out: Path, provenance: dict, only: list[str] | None = None,
           log=print) -> dict:
    """Write the checkpoints, measure the rounding between the two modellings, run every case on both sides
    and write ``out/golden.json``; returns what it wrote."""
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="veridec-golden-"))
    checkpoints, folders, models = _written_checkpoints(out, scratch)
    theirs = {name: official.load_model(spec.layout, folders[name]) for name, spec in MAIN_CHECKPOINTS.items()}
    errors = {}
    for name, spec in MAIN_CHECKPOINTS.items():
        model = models[name]
        errors[name] = measure_error(theirs[name], model, spec.layout, model.special, min(model.vocab_size, 1000))
        log(f"measured logit error {name}: {errors[name]}")
    loops = tuple(sorted(official.fastdllm, key=lambda k: k != "current"))
    cases = grid(models, loops)

    def run_both(case):
        return official.run(case, theirs[case["checkpoint"]]), run_veridec(case, models[case["checkpoint"]])

    cases = assign_ids(cases + hunt_cases(run_both, models, loops))
    if only:
        cases = [case for case in cases if any(case["id"].startswith(prefix) for prefix in only)]
    started = time.time()
    for i, case in enumerate(cases):
        _record_case(case, official, theirs[case["checkpoint"]], models[case["checkpoint"]],
                     max(errors[case["checkpoint"]].values()), log)
        if i % 50 == 0:
            log(f"{i}/{len(cases)} cases, {time.time() - started:.0f} s")
    golden = _golden(official, provenance, checkpoints, errors, cases)
    _write_json(out / GOLDEN_FILE, golden)
    shutil.rmtree(scratch, ignore_errors=True)
    return golden


MAIN_CHECKPOINTS = {name: spec for name, spec in CHECKPOINTS.items() if spec.layout in ("llada", "dream")}


def _written_checkpoints(out: Path, scratch: Path) -> tuple[dict, dict, dict]:
    """Every checkpoint written (committed ones under ``out``, the others in ``scratch``) and loaded back:
    (what golden.json records of each, their folders, veridec's models)."""
    checkpoints, folders, models = {}, {}, {}
    for name, spec in MAIN_CHECKPOINTS.items():
        folder = out / CHECKPOINT_DIR / name if spec.committed else scratch / name
        write_checkpoint(name, folder)
        folders[name] = folder
        models[name] = load_pretrained(folder)
        checkpoints[name] = {"committed": spec.committed, "content_sha256": content_sha256(folder),
                             "special": asdict(models[name].special), "spec": asdict(spec),
                             "files": {p.name: _sha256(p) for p in sorted(folder.iterdir()) if spec.committed}}
    return checkpoints, folders, models


def _record_case(case: dict, official: Official, theirs, model, eps: float, log) -> None:
    """One case on both sides, veridec's decisions probed; its expectation and what it needs written into it."""
    cfg = case["settings"].get("cfg_scale", 0.0)
    tol = SAFETY * eps * (2 * cfg + 1)  # l_u + (w + 1)(l_c - l_u) moves by up to (2w + 1) x the error
    official_run = official.run(case, theirs)
    probe = MarginProbe(tol)
    padded = ignores_padding(case)
    with probe.patched():
        mine = run_veridec(case, model, honour_padding=not padded)
    extra = {"padded": run_veridec(case, model)} if padded else {}
    case.update(classify(case, official_run, mine, probe, extra))
    case["tolerance"] = float(f"{tol:.3g}")
    if case["expect"] in ("disagreement", "near_tie"):
        log(f"{case['id']}: {case['expect']} margin={case['margin']} settings={case['settings']}")


def _golden(official: Official, provenance: dict, checkpoints: dict, errors: dict, cases: list) -> dict:
    import transformers

    sources = {role: {**provenance.get(str(path.resolve()), {"repository": None, "commit": None,
                                                               "path": path.name}), "sha256": _sha256(path)}
               for role, path in official.files.items()}
    return {
        "format": FORMAT,
        "description": "Golden traces of the official LLaDA, Fast-dLLM and Dream samplers (tools/golden/record.py)",
        "recorded_with": {"torch": torch.__version__, "transformers": transformers.__version__,
                          "python": sys.version.split()[0]},
        "sources": sources, "checkpoints": checkpoints, "numerics": errors, "safety": SAFETY,
        "forward_cap": FORWARD_CAP, "cases": cases,
    }


def _write_json(path: Path, golden: dict) -> None:
    """One case per line: diffs stay readable."""
    head = {k: v for k, v in golden.items() if k != "cases"}
    lines = [json.dumps(case, separators=(",", ":")) for case in golden["cases"]]
    text = json.dumps(head, indent=1)[:-2] + ',\n "cases": [\n' + ",\n".join(lines) + "\n ]\n}\n"
    json.loads(text)
    write_text_atomic(path, text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.golden.record", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run the official samplers and write tests/golden/")
    rec.add_argument("--llada", type=Path, required=True, help="ML-GSAI/LLaDA generate.py")
    rec.add_argument("--fastdllm", type=Path, action="append", required=True,
                     help="a Fast-dLLM llada/ folder (generate.py, model/); repeat for the legacy loop")
    rec.add_argument("--dream", type=Path, required=True, help="Fast-dLLM's dream/ folder")
    rec.add_argument("--provenance", type=Path, help="JSON: local file -> {repository, commit, path}")
    rec.add_argument("--out", type=Path, default=Path("tests/golden"))
    rec.add_argument("--only", action="append", help="record only case ids starting with this (debugging)")
    sub.add_parser("summary", help="case counts of tests/golden/golden.json").add_argument(
        "--golden", type=Path, default=Path("tests/golden") / GOLDEN_FILE)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "summary":
        print(json.dumps(summary(json.loads(args.golden.read_text())), indent=1))
        return 0
    import transformers

    if not transformers.__version__.startswith("4."):
        print(f"warning: transformers {transformers.__version__}; the official Dream code needs 4.46",
              file=sys.stderr)
    torch.set_num_threads(1)
    provenance = {}
    if args.provenance:
        base = args.provenance.resolve().parent
        provenance = {str((base / k).resolve()): v for k, v in json.loads(args.provenance.read_text()).items()}
    official = Official.load(args.llada.resolve(), [d.resolve() for d in args.fastdllm], args.dream.resolve())
    golden = record(official, args.out, provenance, args.only)
    print(json.dumps(summary(golden), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
