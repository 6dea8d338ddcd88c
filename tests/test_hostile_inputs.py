"""Hostile input: every case gets a clear error naming what is wrong (or a documented, tested behaviour), never a
traceback and never a silent result. The Python API through ValueError; the command line through ``main`` (exit
code 2 for a bad argument, 1 for an internal failure, one line on stderr) and, for a few cases, a real subprocess.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from veridec.decoding import NonFiniteLogits
from veridec.files import write_text_atomic
from veridec.guidance import GuidanceParams, LinearReward
from veridec.guidance.fastguide import FastGuideParams
from veridec.models import load_pretrained, random_model, save_pretrained
from veridec.optimized.fastguide import generate as fastguide_sparse
from veridec.optimized.parallel import decode as optimized
from veridec.optimized.speculative import decode as speculative
from veridec.reference.dream import diffusion_generate
from veridec.reference.fastguide import generate as fastguide_exact
from veridec.reference.guided import generate as guided, parallel_guided
from veridec.reference.llada import generate as llada
from veridec.reference.parallel import decode as reference
from veridec.rules.dream import DreamParams
from veridec.rules.drafts import DraftTree
from veridec.rules.llada import LLaDAParams
from veridec.rules.parallel import DAPD, KLASS, EntropyBounded, Factor, LocalLeap, Quota, Threshold, TopK
from veridec.rules.presets import PRESETS

NAN, INF = math.nan, math.inf


# ------------------------------------------------------------------------------------- 1. non-finite values
RANGED = [  # (constructor of one parameter, its name); None is a legal "off" for the optional ones below
    (lambda v: Threshold(v), "threshold"), (lambda v: LocalLeap(kappa=v), "kappa"), (lambda v: LocalLeap(tau=v), "tau"),
    (lambda v: Factor(v), "factor"), (lambda v: EntropyBounded(v), "gamma"),
    (lambda v: KLASS(kl_threshold=v), "kl_threshold"), (lambda v: KLASS(confidence=v), "confidence"),
    (lambda v: DAPD(top_layers=v), "top_layers"), (lambda v: DAPD(scale=v), "scale"), (lambda v: TopK(v), "k"),
    (lambda v: Quota(v), "steps_per_block"), (lambda v: LLaDAParams(temperature=v), "temperature"),
    (lambda v: LLaDAParams(cfg_scale=v), "cfg_scale"), (lambda v: DreamParams(top_p=v), "top_p"),
    (lambda v: DreamParams(eps=v), "eps"), (lambda v: DreamParams(alg_temp=v), "alg_temp"),
    (lambda v: FastGuideParams(tau=v), "tau"), (lambda v: GuidanceParams(lr=v), "lr"),
    (lambda v: DraftTree(width=v), "width"),
]
OPTIONAL = {"top_p", "alg_temp"}


@pytest.mark.parametrize("make, name", RANGED, ids=[name for _, name in RANGED])
@pytest.mark.parametrize("value", [NAN, INF, -INF, "0.5", True, None], ids=str)
def test_every_range_check_refuses_non_finite_and_non_numbers(make, name, value):
    if value is None and name in OPTIONAL:
        make(value)  # None switches the filter off (SQ2.5)
        return
    with pytest.raises(ValueError, match=f"^{name} must "):
        make(value)


def poisoned(model, value: float, token: int = 5):
    """The model with its logits set to ``value`` in one vocabulary column (every forward, cached or not)."""
    raw = model.raw_forward

    def forward(*args, **kwargs):
        out = raw(*args, **kwargs)
        out.logits[..., token] = value
        return out

    model.raw_forward = forward
    return model


def linear_reward(model):
    g = torch.Generator().manual_seed(0)
    return LinearReward(torch.randn(model.vocab_size, 4, generator=g), torch.randn(4, generator=g))


DECODERS = {
    "llada": lambda m, p: llada(m, p, steps=4, gen_length=4, block_length=4),
    "llada-cfg": lambda m, p: llada(m, p, steps=4, gen_length=4, block_length=4, cfg_scale=1.0),
    "dream": lambda m, p: diffusion_generate(m, p, max_new_tokens=4, steps=4, alg="entropy"),
    "reference": lambda m, p: reference(m, p, rule=PRESETS["fastdllm"], gen_length=4, block_length=4),
    "none": lambda m, p, **o: optimized(m, p, rule=PRESETS["klass-hq"], cache="none", gen_length=4, block_length=4,
                                        **o),
    "prefix": lambda m, p, **o: optimized(m, p, rule=PRESETS["localleap"], cache="prefix", gen_length=4,
                                          block_length=2, **o),
    "dual": lambda m, p, **o: optimized(m, p, rule=PRESETS["eb-hq"], cache="dual", gen_length=4, block_length=2,
                                        **o),
    "speculative": lambda m, p: speculative(m, p, rule=TopK(1), cache="dual", width=2, depth=2, gen_length=6,
                                            block_length=6),
    "guided": lambda m, p: guided(m, p, linear_reward(m), ["a"], gen_length=3, guidance=GuidanceParams(steps=1)),
    "parallel-guided": lambda m, p: parallel_guided(m, p, linear_reward(m), ["a"], PRESETS["conf-hq"], gen_length=4,
                                                    guidance=GuidanceParams(steps=1)),
    "fastguide-exact": lambda m, p: fastguide_exact(m, p, linear_reward(m), ["a"], gen_length=4,
                                                    guidance=GuidanceParams(steps=1)),
    "fastguide-sparse": lambda m, p: fastguide_sparse(m, p, linear_reward(m), ["a"], gen_length=4,
                                                      guidance=GuidanceParams(steps=1)),
}


@pytest.mark.parametrize("value", [NAN, INF])
@pytest.mark.parametrize("name", sorted(DECODERS))
def test_decoders_refuse_nan_and_positive_infinite_logits_naming_step_and_position(name, value):
    model = poisoned(random_model("llada" if name != "dream" else "dream", 0), value)
    prompt = torch.tensor([[7, 8, 9]])
    with pytest.raises(NonFiniteLogits, match=r"at step \d+ \(after model call \d+\) are (nan|inf) at row 0"):
        DECODERS[name](model, prompt)


def every_token_banned(model, position: int = -1):
    """The model with every logit -inf at one column of each forward's window (the last by default)."""
    raw = model.raw_forward

    def forward(*args, **kwargs):
        out = raw(*args, **kwargs)
        out.logits[:, position, :] = -INF
        return out

    model.raw_forward = forward
    return model


@pytest.mark.parametrize("name", sorted(DECODERS))
def test_decoders_refuse_a_position_where_every_token_is_banned(name):
    """-inf in every vocabulary column leaves nothing to draw (softmax NaN): an error naming step, call, row and
    position. Classifier-free guidance turns -inf - -inf into NaN first, which is refused as NaN."""
    # Dream reads position i's logits from column i - 1 (M3): its last column predicts nothing.
    model = every_token_banned(random_model("dream", 0), -2) if name == "dream" else every_token_banned(
        random_model("llada", 0))
    message = (r"at step \d+ \(after model call \d+\) are (-inf for every token at row 0, position \d+|nan at row 0)"
               if name == "llada-cfg" else
               r"at step \d+ \(after model call \d+\) are -inf for every token at row 0, position \d+: ")
    with pytest.raises(NonFiniteLogits, match=message):
        DECODERS[name](model, torch.tensor([[7, 8, 9]]))


def test_the_banned_position_is_named_in_canvas_coordinates():
    model = every_token_banned(random_model("llada", 0), position=4)
    with pytest.raises(NonFiniteLogits, match=r"at step 0 \(after model call 1\) are -inf for every token at row 0, "
                                              r"position 4: "):
        DECODERS["reference"](model, torch.tensor([[7, 8, 9]]))


PARALLEL = ["reference", "none", "prefix", "dual", "speculative"]


@pytest.mark.parametrize("name", PARALLEL)
@pytest.mark.parametrize("value", [NAN, INF, -INF])
def test_a_parallel_step_reads_only_its_candidates(name, value):
    """SQ0.6: a parallel decoder's step checks (and reads) the logits of its candidates only; a model whose full
    forwards are NaN, +inf or all -inf at the first prompt position, which no step acts on, decodes as the clean
    model does."""
    clean = random_model("llada", 0, dtype=torch.float64)
    model = random_model("llada", 0, dtype=torch.float64)
    for method in ("forward", "prefill"):  # the full forwards; column 0 is prompt position 0 there
        def poisoned_full(*args, _inner=getattr(model, method), **kwargs):
            out = _inner(*args, **kwargs)
            (out[0] if isinstance(out, tuple) else out).logits[:, 0] = value
            return out

        setattr(model, method, poisoned_full)
    prompt = torch.tensor([[7, 8, 9]])
    # the poisoned forwards take no ``logit_rows``: both decodes compute the whole window's logits (narrowed ones would
    # not compute column 0 at all, and round a few last bits differently)
    options = {"narrow_logits": False} if name in ("none", "prefix", "dual") else {}
    want, got = DECODERS[name](clean, prompt, **options), DECODERS[name](model, prompt, **options)
    assert torch.equal(got.canvas, want.canvas) and got.trace.to_dict() == want.trace.to_dict()


@pytest.mark.parametrize("seed", range(40))
def test_the_fused_check_refuses_what_check_logits_refuses(seed):
    """The optimized step's check (NaN in p(x̂) at a candidate, read off its float64 softmax) refuses exactly
    the logits ``check_logits(..., where=candidates)`` refuses, with the same message."""
    from veridec.decoding import check_logits, check_step_logits
    from veridec.rules.step import step_view
    from veridec.trace import Trace

    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, 5, 7, generator=g)
    for _ in range(int(torch.randint(0, 4, (), generator=g))):
        row, column = (int(torch.randint(0, n, (), generator=g)) for n in (2, 5))
        kind = int(torch.randint(0, 3, (), generator=g))
        if kind == 2:
            logits[row, column] = -INF
        else:
            logits[row, column, int(torch.randint(0, 7, (), generator=g))] = (NAN, INF)[kind]
    candidates = torch.rand(2, 5, generator=g) < 0.5
    token_probs = step_view(logits, logits.argmax(-1), candidates).token_probs
    errors = []
    for check in (lambda: check_logits(logits, Trace("t", {}, 0, 2).progress, offset=3, where=candidates),
                  lambda: check_step_logits(logits, token_probs, candidates, Trace("t", {}, 0, 2).progress, offset=3)):
        try:
            check()
            errors.append(None)
        except NonFiniteLogits as error:
            errors.append(str(error))
    assert errors[0] == errors[1]


def test_minus_infinity_logits_stay_allowed():
    """-inf bans a token: a model whose mask logit is -inf everywhere decodes (every test's never_predicts_mask)."""
    model = poisoned(random_model("llada", 0), -INF, token=random_model("llada", 0).special.mask_id)
    canvas, _ = llada(model, torch.tensor([[7, 8]]), steps=4, gen_length=4, block_length=4, cfg_scale=1.0)
    assert (canvas != model.special.mask_id).all()


def test_a_nan_reward_score_is_refused():
    model = random_model("llada", 0)
    reward = LinearReward(torch.randn(model.vocab_size, 4), torch.tensor([NAN, 0.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="reward's score is nan"):
        guided(model, torch.tensor([[7, 8]]), reward, ["a"], gen_length=2, guidance=GuidanceParams(steps=1))


# ------------------------------------------------------------------------------------ 2. prompts and masks
WITH_MASK = {  # decoders that take an attention mask third, as the official ones do
    "llada": lambda m, p, a: llada(m, p, a, steps=2, gen_length=2, block_length=2),
    "dream": lambda m, p, a: diffusion_generate(m, p, a, max_new_tokens=2, steps=2),
    "reference": lambda m, p, a: reference(m, p, a, rule=TopK(1), gen_length=2, block_length=2),
    "dual": lambda m, p, a: optimized(m, p, a, rule=TopK(1), cache="dual", gen_length=2, block_length=2),
    "speculative": lambda m, p, a: speculative(m, p, a, rule=TopK(1), width=1, depth=2, gen_length=4,
                                               block_length=4),
    "fastguide-sparse": lambda m, p, a: fastguide_sparse(m, p, linear_reward(m), ["a"] * len(p), a, gen_length=2),
}
BAD_PROMPTS = [
    (torch.tensor([[7.0, 8.0]]), None, "integer tensor of token ids"),
    (torch.tensor([[True, False]]), None, "integer tensor of token ids"),
    ([[7, 8]], None, "integer tensor of token ids"),
    (torch.tensor([7, 8]), None, r"must be \[B, P\]"),
    (torch.tensor([[[7, 8]]]), None, r"must be \[B, P\]"),
    (torch.zeros(0, 3, dtype=torch.long), None, r"must be \[B, P\] with B, P >= 1"),
    (torch.zeros(1, 0, dtype=torch.long), None, r"must be \[B, P\] with B, P >= 1"),
    (torch.tensor([[7, -1]]), None, r"token ids must lie in \[0, 100\)"),
    (torch.tensor([[7, 100]]), None, r"token ids must lie in \[0, 100\)"),
    (torch.tensor([[7, 8]]), torch.tensor([[0, 0]]), "hides the whole prompt of row 0"),
    (torch.tensor([[7, 8]]), torch.tensor([[1, 1, 1]]), "must have the prompt's shape"),
    (torch.tensor([[7, 8]]), torch.tensor([[2, 1]]), "must hold 0 .* and 1"),
]


@pytest.mark.parametrize("prompt, mask, message", BAD_PROMPTS)
@pytest.mark.parametrize("decoder", sorted(WITH_MASK))
def test_bad_prompts_are_refused_before_any_forward(prompt, mask, message, decoder):
    model = random_model("dream" if decoder == "dream" else "llada", 0)
    calls = []
    model.raw_forward = lambda *a, **k: calls.append(1)  # no forward may run
    with pytest.raises(ValueError, match=message):
        WITH_MASK[decoder](model, prompt, mask)
    assert not calls


def test_a_prompt_made_only_of_mask_tokens_is_refused():
    model = random_model("llada", 0)
    m = model.special.mask_id
    with pytest.raises(ValueError, match="row 1 is made only of the mask token"):
        llada(model, torch.tensor([[7, m], [m, m]]), steps=2, gen_length=2, block_length=2)


def test_a_mask_id_outside_the_vocabulary_is_refused():
    with pytest.raises(ValueError, match=r"mask_id must lie in \[0, 100\)"):
        llada(random_model("llada", 0), torch.tensor([[7]]), steps=2, gen_length=2, block_length=2, mask_id=1000)


@pytest.mark.parametrize("rule", ["localleap", None, 0.9, Threshold])
def test_a_rule_must_be_a_rule_object(rule):
    model = random_model("llada", 0)
    for decode in (reference, optimized, speculative):
        with pytest.raises(ValueError, match="rule must be a decoding rule .* got"):
            decode(model, torch.tensor([[7]]), rule=rule, gen_length=2, block_length=2)
    with pytest.raises(ValueError, match="rule must be a decoding rule"):
        parallel_guided(model, torch.tensor([[7]]), linear_reward(model), ["a"], rule, gen_length=2)


# ---------------------------------------------------------------------------------------- 3. checkpoints
def copy_folder(source: Path, target: Path) -> Path:
    target.mkdir()
    for file in source.iterdir():
        (target / file.name).write_bytes(file.read_bytes())
    return target


def test_truncated_and_corrupt_safetensors_name_the_file(tiny_folders, tmp_path):
    dream = copy_folder(tiny_folders["dream"], tmp_path / "truncated")
    weights = dream / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(ValueError, match=r"model.safetensors: (tensor .* cannot be read|not a readable safetensors)"):
        load_pretrained(dream)
    corrupt = copy_folder(tiny_folders["dream"], tmp_path / "corrupt")
    (corrupt / "model.safetensors").write_bytes(b"\x00\x01 not safetensors at all")
    with pytest.raises(ValueError, match="model.safetensors: not a readable safetensors file"):
        load_pretrained(corrupt)


@pytest.mark.parametrize("key, value, message", [
    ("num_attention_heads", "4", "num_attention_heads must be an integer >= 1, got '4'"),
    ("hidden_size", 32.5, "hidden_size must be an integer >= 1"),
    ("rope_theta", "big", "rope_theta must be a finite number > 0"),
    ("max_position_embeddings", -1, "max_position_embeddings must be an integer >= 1"),
    ("tie_word_embeddings", "yes", "tie_word_embeddings must be true or false"),
    ("num_key_value_heads", 3, "num_heads 4 must be divisible by num_kv_heads 3"),
])
def test_config_values_of_the_wrong_type_name_config_json(tiny_folders, tmp_path, key, value, message):
    folder = copy_folder(tiny_folders["dream"], tmp_path / "dream")
    config = json.loads((folder / "config.json").read_text())
    config[key] = value
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=f"config.json: {message}"):
        load_pretrained(folder)


def test_a_tokenizer_larger_than_the_embedding_is_refused_at_load(tmp_path):
    save_pretrained(random_model("llada", 0), tmp_path / "small")  # the character tokenizer has 100 tokens
    config_file = tmp_path / "small" / "config.json"
    config = json.loads(config_file.read_text())
    config["vocab_size"] = config["embedding_size"] = 64
    config_file.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="tokenizer.json: the tokenizer has 100 tokens, more than the model's "
                                         "vocabulary of 64"):
        load_pretrained(tmp_path / "small")


def test_the_reward_loader_never_reads_a_pickle(tmp_path):
    from veridec.guidance import load_reward_model
    from veridec.guidance.tiny import write_tiny_reward_model
    from veridec.models.tokenizer import char_tokenizer

    folder = write_tiny_reward_model(tmp_path / "reward")
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")  # only a "pickle" left
    with pytest.raises(OSError):
        load_reward_model(folder, char_tokenizer("llada"))


# ---------------------------------------------------------------------------------------- 4. output paths
def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("complete")
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(target, "half \ud800 written")  # fails while writing
    assert target.read_text() == "complete" and sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_output_paths_are_checked_before_any_computation(cli, tiny_folders, tmp_path):
    model = ["--model", tiny_folders["llada"]]
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    cases = [
        (["generate", "--prompt", "ab", *model, "--trace", tmp_path], "--trace .*: is a directory"),
        (["verify", *model, "--quick", "--json", tmp_path], "--json .*: is a directory"),
        (["verify", *model, "--quick", "--out", a_file], "--out .*: is a file, not a folder"),
        (["exactness", *model, "--quick", "--out", a_file], "--out .*: is a file, not a folder"),
        (["bounds", "--cases", "10", "--json", tmp_path], "--json .*: is a directory"),
        (["experiment", "models", "--quick", "--out", a_file], "--out .*: is a file, not a folder"),
        (["generate", "--prompt", "ab", *model, "--trace", a_file / "trace.json"], "--trace .*: a parent is a file"),
    ]
    for argv, message in cases:
        code, out, err = cli(*argv)
        assert code == 2 and out == "" and err.count("\n") == 1, (argv, err)
        assert __import__("re").search(message, err), (argv, err)


def test_json_and_trace_parents_are_created(cli, tiny_folders, tmp_path):
    trace = tmp_path / "new" / "deeper" / "trace.json"
    code, _, _ = cli("generate", "--prompt", "ab", "--model", tiny_folders["llada"], "--gen-length", "4", "--quiet",
                     "--trace", trace)
    assert code == 0 and trace.is_file()


@pytest.fixture
def unwritable(tmp_path):
    """A folder no file can be created in: mode 555 for a user; for root (who passes permission bits), sysfs's
    /sys/kernel, which refuses new files to everyone."""
    if os.geteuid() != 0:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        return folder
    if not Path("/sys/kernel").is_dir():
        pytest.skip("running as root without /sys/kernel: no folder here refuses root a new file")
    return Path("/sys/kernel")


def test_unwritable_output_folders_are_one_clear_line_before_any_work(cli, tiny_folders, unwritable):
    model = ["--model", tiny_folders["llada"]]
    cases = [
        ["bounds", "--cases", "10", "--json", unwritable / "b.json"],
        ["generate", "--prompt", "ab", *model, "--trace", unwritable / "t.json"],
        ["verify", *model, "--quick", "--out", unwritable],
        ["verify", *model, "--quick", "--out", unwritable / "deeper"],
        ["exactness", *model, "--quick", "--out", unwritable],
        ["experiment", "models", "--quick", "--out", unwritable],
    ]
    for argv in cases:
        code, out, err = cli(*argv)
        assert code == 2 and out == "" and err.count("\n") == 1, (argv, err)
        assert "is not writable" in err or "cannot create" in err, (argv, err)


# ------------------------------------------------------------------------------------------- 5. arguments
@pytest.mark.parametrize("argv, message", [
    (["generate", "--prompt", "ab", "--block-length", "0"], "--block-length: must lie in [1, inf), got 0"),
    (["generate", "--prompt", "ab", "--gen-length", "0"], "--gen-length: must lie in [1, inf), got 0"),
    (["generate", "--prompt", "ab", "--temperature", "nan"], "--temperature: must be a finite number"),
    (["generate", "--prompt", "ab", "--cfg-scale", "nan"], "--cfg-scale: must be a finite number"),
    (["generate", "--prompt", "ab", "--temperature", "inf"], "--temperature: must be a finite number"),
    (["generate", "--prompt", "ab", "--sampler", "dream", "--block-length", "4"], "--block-length do(es) not apply"),
    (["generate", "--prompt", "ab", "--sampler", "dream", "--cfg-scale", "1"], "--cfg-scale do(es) not apply"),
    (["generate", "--prompt", "ab", "--alg", "entropy"], "--alg do(es) not apply to --sampler llada"),
    (["generate", "--prompt", "ab", "--seed", "-1"], "--seed: must lie in [0, 9223372036854775807]"),
    (["generate", "--prompt", "ab", "--seed", str(2**63)], "--seed: must lie in [0, 9223372036854775807]"),
    (["generate", "--prompt", "ab", "--seed", "x"], "--seed: must be an integer"),
    (["verify", "--fresh"], "--fresh recomputes the records of --out; give --out"),
    (["verify", "--only", "no-such-check"], "matches no check"),
    (["exactness", "--prompts", "0"], "--prompts: must lie in [1, 4096], got 0"),
    (["exactness", "--prompts", "100000000"], "--prompts: must lie in [1, 4096]"),
    (["exactness", "--decoders", "nope"], "unknown preset(s) ['nope']"),
    (["exactness", "--gen-length", "48", "--block-length", "32"], "must be a multiple of --block-length 32"),
    (["bounds", "--cases", "0"], "--cases: must lie in [1, 1000000000], got 0"),
    (["baseline"], "invalid choice: 'baseline'"),  # a maintainers' tool now: python -m tools.baseline
    (["train", "tasks"], "invalid choice: 'train'"),  # likewise: python -m tools.training.dllm
    (["experiment", "nope"], "invalid choice: 'nope'"),
    (["nope"], "invalid choice: 'nope'"),
    (["generate"], "one of the arguments --prompt --prompt-ids is required"),
])
def test_bad_arguments_exit_2_with_one_line(cli, argv, message):
    code, out, err = cli(*argv)
    assert code == 2 and out == "" and err.count("\n") == 1, (argv, err)
    assert err.startswith("veridec: error: ") and message in err, err


def test_bounds_runs_exactly_the_cases_asked_for(cli, tmp_path):
    for cases in (1, 5, 59, 61):
        code, _, _ = cli("bounds", "--cases", cases, "--json", tmp_path / "b.json")
        assert code == 0 and json.loads((tmp_path / "b.json").read_text())["cases"] == cases


@pytest.mark.parametrize("argv, message", [
    (["--gen-lengths", "64,abc"], "--gen-lengths must be comma-separated integers"),
    (["--gen-lengths", "50"], "multiples of the block length 32"),
    (["--file", "/nonexistent/baseline.json"], "no counter baseline there"),
])
def test_the_baseline_tool_refuses_bad_arguments_with_one_line(argv, message, capsys):
    from tools import baseline

    assert baseline.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_training_refuses_zero_steps(tmp_path):
    from tools.training import dllm, reward

    for train, argv in ((dllm.main, ["tasks", "--out", tmp_path / "t", "--steps", "0"]),
                        (reward.main, ["--out", tmp_path / "r", "--steps", "0"])):
        with pytest.raises(SystemExit) as stop:  # the training scripts' own argparse: usage and exit code 2
            train([str(a) for a in argv])
        assert stop.value.code == 2


def test_the_baseline_file_is_found_from_any_directory(monkeypatch, tmp_path):
    from tools import baseline

    monkeypatch.chdir(tmp_path)
    assert baseline.BASELINE.is_absolute() and baseline.BASELINE.is_file()


def test_an_internal_failure_exits_1_with_its_message(cli, tmp_path):
    """A model whose weights are NaN: the arguments are fine, the decode fails (exit 1, not 2)."""
    model = random_model("llada", 0)
    with torch.no_grad():
        model.lm_head.weight.fill_(NAN)
    save_pretrained(model, tmp_path / "nan-model")
    code, _, err = cli("generate", "--prompt", "ab", "--model", tmp_path / "nan-model", "--gen-length", "4", "--quiet")
    assert code == 1 and err.startswith("veridec: error: NonFiniteLogits: ") and err.count("\n") == 1


# ------------------------------------------------------------------------------------------------ 6. infill
def test_masks_inside_a_prompt_follow_each_official_sampler(cli):
    """The mask token's text marks positions to infill. LLaDA (SQ1.3): the prompt's masks compete for the
    generation's quota, as in the official generate.py, so positions may stay masked, and generate says so;
    Dream (SQ2.4) fills every mask."""
    prompt = "count 1<|mdm_mask|> 3 4 "
    code, out, err = cli("generate", "--prompt", prompt, "--gen-length", "8", "--quiet")
    assert code == 0 and "still masked" in err
    assert out.splitlines()[0].startswith("count 1")
    code, out, err = cli("generate", "--prompt", prompt, "--gen-length", "8", "--quiet", "--sampler", "dream")
    assert code == 0 and "<|mdm_mask|>" not in out and "still masked" not in err


# ---------------------------------------------------------------------------------------- 8. small truths
def test_a_passing_bounds_row_never_shows_a_negative_margin(cli, tmp_path):
    code, _, _ = cli("verify", "--only", "bounds/", "--quick", "--quiet", "--json", tmp_path / "v.json")
    rows = json.loads((tmp_path / "v.json").read_text())["checks"]
    assert code == 0 and rows
    assert all(r["worst_margin"] is None or r["worst_margin"] >= 0 for r in rows if r["passed"]), rows


# ----------------------------------------------------------------------------------------- real processes
@pytest.mark.parametrize("argv, code", [
    (["generate", "--prompt", "ab", "--gen-length", "4", "--seed", "-3"], 2),
    (["exactness", "--prompts", "0"], 2),
    (["bounds", "--cases", "12"], 0),
])
def test_the_installed_command_exits_cleanly(argv, code):
    """Through a real process: the exit code, and no traceback on stderr."""
    done = subprocess.run([sys.executable, "-m", "veridec.harness.cli", *argv], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == code and "Traceback" not in done.stderr, done.stderr


def test_a_canvas_of_exactly_the_context_decodes_and_one_more_is_refused():
    """M4: prompt + generation may fill the model's context exactly; one position more is refused before any
    forward, naming both lengths."""
    model = random_model("llada", 0, max_length=8)
    fits = llada(model, torch.tensor([[7, 8, 9, 10]]), steps=4, gen_length=4, block_length=4)
    assert fits.canvas.shape == (1, 8)
    with pytest.raises(ValueError, match="max_length 8"):
        llada(model, torch.tensor([[7, 8, 9, 10, 11]]), steps=4, gen_length=4, block_length=4)


# -------------------------------------------------------------- hostile input, third round (sweep 29)
def test_an_output_path_that_is_not_a_regular_file_is_never_replaced(cli, tiny_folders, tmp_path):
    """/dev/full was once renamed over by --trace; a folder where exactness.md goes failed at the end of the run."""
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    table = tmp_path / "table"
    (table / "exactness.md").mkdir(parents=True)
    model = ["--model", tiny_folders["llada"]]
    for argv, message in (
            (["generate", "--prompt", "ab", *model, "--trace", "/dev/full"],
             "--trace /dev/full: is not a regular file"),
            (["bounds", "--cases", "10", "--json", fifo], f"--json {fifo}: is not a regular file"),
            (["exactness", *model, "--quick", "--out", table], f"{table / 'exactness.md'} is a folder")):
        code, out, err = cli(*argv)
        assert code == 2 and out == "" and err.count("\n") == 1 and message in err, (argv, err)
    assert Path("/dev/full").is_char_device() and fifo.is_fifo()
    with pytest.raises(ValueError, match="exists and is not a regular file"):
        write_text_atomic(fifo, "x")
    assert fifo.is_fifo()


def test_a_records_file_with_another_hard_link_is_refused(cli, tiny_folders, tmp_path):
    """A hard link may lead outside --out: appending would change a file the run does not own."""
    outside = tmp_path / "outside.txt"
    outside.write_text("")
    out = tmp_path / "out"
    out.mkdir()
    os.link(outside, out / "exactness.records.jsonl")
    code, _, err = cli("exactness", "--model", tiny_folders["llada"], "--quick", "--decoders", "sequential",
                       "--quiet", "--out", out)
    assert code == 2 and err.count("\n") == 1 and "the records file has 2 hard links" in err, err
    assert outside.read_text() == ""


def test_a_folder_mixing_weight_dtypes_names_the_tensor(tmp_path):
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "mixed"
    save_pretrained(random_model("llada", 0), folder)
    tensors = load_file(folder / "model.safetensors")
    odd = sorted(tensors)[-1]
    tensors[odd] = tensors[odd].half()
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=f"tensor {odd} has dtype torch.float16, the other .* tensors torch.float32: "
                                         "a model runs at one dtype"):
        load_pretrained(folder)
    assert load_pretrained(folder, dtype=torch.float32).lm_head.weight.dtype == torch.float32  # one asked for


@pytest.mark.parametrize("env, message", [
    ({"WORLD_SIZE": "two"}, "environment variable WORLD_SIZE must be an integer >= 1, got 'two'"),
    ({"WORLD_SIZE": "0"}, "environment variable WORLD_SIZE must be an integer >= 1, got '0'"),
    ({"WORLD_SIZE": "2", "RANK": "5"}, "environment variable RANK must be an integer in [0, 1] (WORLD_SIZE=2), "
                                       "got '5'"),
    ({"WORLD_SIZE": "2"}, "environment variable RANK must be an integer in [0, 1] (WORLD_SIZE=2), got None"),
])
def test_a_bad_torchrun_environment_is_one_line(cli, tiny_folders, tmp_path, monkeypatch, env, message):
    monkeypatch.delenv("RANK", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, _, err = cli("exactness", "--model", tiny_folders["llada"], "--quick", "--decoders", "sequential",
                       "--quiet", "--out", tmp_path / "out")
    assert code == 2 and err.count("\n") == 1 and message in err, err


def test_a_row_whose_real_tokens_are_all_masks_is_refused_even_with_padding():
    from veridec.canvas import check_prompt
    from veridec.testing import load_check_model

    model = load_check_model("tiny-llada")
    mask, pad = model.special.mask_id, model.special.pad_id
    with pytest.raises(ValueError, match="prompt row 1 is made only of the mask token"):
        check_prompt(model, torch.tensor([[5, 6], [pad, mask]]), torch.tensor([[1, 1], [0, 1]]), mask)
    check_prompt(model, torch.tensor([[5, 6], [pad, 7]]), torch.tensor([[1, 1], [0, 1]]), mask)  # a real token
