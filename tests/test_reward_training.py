"""The shipped reward model's training script (spec/guidance.md G3b): labels, input layout, a tiny end-to-end run."""

import copy
import random

import pytest
import torch

from veridec.harness import corpus
from veridec.harness.workloads import corpus_cases
from veridec.guidance import load_reward_model
from veridec.guidance.tiny import tiny_reward_model
from tools.training import reward as train_reward
from veridec.models.shipped import load_model
from veridec.numerics import assert_within_rounding


def test_labels_are_the_checkers_validity_of_the_written_lines():
    dllm = load_model("default")
    rng = random.Random(0)
    for _ in range(20):
        document, prompt, _ = corpus_cases(1, rng)[0]
        rest = document[len(prompt):]
        ids = dllm.tokenizer(rest)["input_ids"] + [dllm.special.eos_id] * 8
        assert train_reward.response_validity(dllm, prompt, ids) == 1.0  # the true continuation
        example = train_reward.edited(dllm, train_reward.Example(prompt, tuple(ids), 1.0), rng)
        lines = (prompt.split("\n")[-1] + dllm.tokenizer.decode(
            [t for t in example.response if t != dllm.special.eos_id])).split("\n")
        assert len(example.response) == len(ids)
        assert example.target == corpus.score_text("\n".join(lines)).rate


def test_edits_keep_the_region_length_with_or_without_eos():
    dllm = load_model("default")
    rng = random.Random(2)
    for _ in range(30):
        ids = dllm.tokenizer("add 12+30=42\ncopy abc>abc\n")["input_ids"][:rng.randint(5, 25)]
        example = train_reward.edited(dllm, train_reward.Example("add ", tuple(ids), 1.0), rng)
        assert example is None or len(example.response) == len(ids)


def test_training_inputs_are_what_score_tokens_scores():
    dllm = load_model("default")
    model, tokenizer = tiny_reward_model(0, hidden_size=32, layers=1)
    inputs = train_reward.Inputs(model, tokenizer, dllm.tokenizer)
    rng = random.Random(1)
    examples = [train_reward.continuation(dllm, rng) for _ in range(3)]
    batch = model(*inputs(examples)).logits[:, 0]
    inputs64 = train_reward.Inputs(copy.deepcopy(model).double(), tokenizer, dllm.tokenizer)
    scorers = {torch.float32: inputs.scorer, torch.float64: inputs64.scorer}
    alone = {dtype: torch.cat([scorer.bind([e.prompt]).score_tokens(torch.tensor([e.response])) for e in examples])
             for dtype, scorer in scorers.items()}
    assert_within_rounding(batch, alone[torch.float32], alone[torch.float64], "training batch vs score_tokens")


def test_a_tiny_run_writes_a_loadable_reward_folder(tmp_path):
    config = train_reward.RewardTrainConfig(steps=2, batch_size=4, hidden_size=16, layers=1, policy_examples=4,
                                            eval_examples=4)
    report = train_reward.train(config, tmp_path / "reward")
    assert set(report["held_out"]) == {"auc_valid_vs_not", "pearson_r", "examples", "share_fully_valid"}
    reward = load_reward_model(tmp_path / "reward", load_model("default").tokenizer)
    assert reward.bind(["count 1 2 "]).score_tokens(torch.tensor([[5, 6, 44]])).shape == (1,)
    guided_round = train_reward.RewardTrainConfig(steps=1, batch_size=4, policy_examples=4, eval_examples=4,
                                                  guided_examples=4, init=str(tmp_path / "reward"))
    report = train_reward.train(guided_round, tmp_path / "guided")
    assert report["config"]["hidden_size"] == 16 and report["init_report"]["config"]["steps"] == 2
    assert report["held_out_guided_by_init"]["examples"] == 1


def test_the_shipped_reward_agrees_with_the_checkers_on_held_out_generations():
    """G3b: on the first 64 held-out generations (the training report's held-out stream) the shipped reward
    measured AUC 0.63, Pearson r 0.24 (all 512: 0.62, 0.33); a reward at chance would give 0.5 and 0."""
    from veridec.guidance.shipped import load_default_reward

    dllm = load_model("default")
    reward = load_default_reward(dllm.tokenizer)
    held_out = train_reward.policy_pool(dllm, 64, seed=10_001)
    agreement = train_reward.agreement_on(reward.model, train_reward.Inputs(reward.model, reward.tokenizer,
                                                                             dllm.tokenizer), held_out)
    assert agreement["auc_valid_vs_not"] > 0.55 and agreement["pearson_r"] > 0.1


def test_bad_training_configurations_name_the_parameter(tmp_path):
    for kw, message in [(dict(steps=0), r"steps must lie in \[1, inf\)"), (dict(lr=0.0), r"lr must lie in"),
                        (dict(hidden_size=30), "hidden_size must be a positive multiple of 4"),
                        (dict(guided_examples=-1), r"guided_examples must lie in \[0, inf\)")]:
        with pytest.raises(ValueError, match=message):
            train_reward.RewardTrainConfig(**kw)
    with pytest.raises(FileNotFoundError, match="init: .* has no config.json"):
        train_reward.RewardTrainConfig(init=str(tmp_path))
