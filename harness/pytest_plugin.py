"""The pytest plugin (entry point ``pytest11``, on with ``pip install veridec``): fixtures for the check models,
the shipped models, the oracles and the adapters, and ``assert_decoder_matches``. This module imports pytest
only; torch, Hypothesis and the decoders load when a fixture is first requested, so the plugin costs nothing in
a test session that does not use it (tests/test_plugin.py holds it to that).

    def test_my_decoder(veridec_check):
        veridec_check(my_generate, against="fastdllm", cache="dual", model="tiny-llada")
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_llada():
    """A tiny LLaDA-layout check model (veridec.testing.models: tied LM-head pairs, never proposes the mask)."""
    from veridec.testing.models import load_check_model

    return load_check_model("tiny-llada")


@pytest.fixture(scope="session")
def tiny_dream():
    """A tiny Dream-layout check model."""
    from veridec.testing.models import load_check_model

    return load_check_model("tiny-dream")


@pytest.fixture(scope="session")
def default_model():
    """The shipped default model (4-layer LLaDA layout, trained on the task corpus)."""
    from veridec.models.shipped import load_model

    return load_model("default")


@pytest.fixture(scope="session")
def hmm_model():
    """The shipped model trained on a known HMM, with that HMM as ``hmm_model.world``."""
    from veridec.models.shipped import load_model
    from veridec.oracles.world import load_world_hmm

    model = load_model("hmm")
    model.world = load_world_hmm()
    return model


@pytest.fixture
def enumerated_oracle():
    """A random enumerated joint over V^L with exact conditionals: ``enumerated_oracle(vocab, length, seed)``."""
    from veridec.oracles import EnumeratedJoint

    return lambda vocab=3, length=4, seed=0: EnumeratedJoint.random(vocab, length, seed=seed)


@pytest.fixture
def adapt():
    """``adapt(model, convention)``: a model behind the llada / fastdllm / dream calling convention."""
    from veridec.adapters import adapt as adapt_model

    return adapt_model


@pytest.fixture
def veridec_check():
    """``veridec_check(candidate, against=..., **options)``: check_decoder, failing the test with the report."""
    from veridec.testing import assert_decoder_matches

    return assert_decoder_matches
