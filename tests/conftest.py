"""Test setup: single-threaded torch (OpenMP spinning is ~40x slower under contention), hypothesis profiles."""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, Phase, settings  # noqa: E402

torch.set_num_threads(1)

# ci: derandomized and deadline-free (used by .ci/run through `--hypothesis-profile=ci`); dev: random.
settings.register_profile("ci", derandomize=True, deadline=None, max_examples=50, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", deadline=None, max_examples=20,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# seeded: random draws from a fixed seed (`--hypothesis-seed=N`), no example database, no shrinking (a kill needs a
# failure, not its smallest example): the mutation gate's `--seeds N` runs (a kill that holds for one draw only is
# luck). deep: random draws with VERIDEC_DEEP_EXAMPLES examples a test, shrinking kept (tools/oracle_profile.py;
# default 1000; `oracles.bridge.examples` lifts tests that ask for more).
settings.register_profile("seeded", derandomize=False, database=None, deadline=None, max_examples=50, print_blob=True,
                          phases=[Phase.explicit, Phase.generate],
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("deep", derandomize=False, database=None, deadline=None, print_blob=True,
                          max_examples=int(os.environ.get("VERIDEC_DEEP_EXAMPLES", "1000")),
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.filter_too_much])
# explicit: the ci profile's explicit @examples only, no generated case (tools/oracle_coverage.py: what the tests reach
# on purpose, whatever the draws).
settings.register_profile("explicit", settings.get_profile("ci"), phases=[Phase.explicit])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(autouse=True)
def _fresh_global_state():
    """Every test starts from the same global state, whatever ran before it: torch's, Python's and numpy's global
    RNGs seeded, one thread, float32 default dtype (a test's draws never depend on the test order)."""
    import random

    import numpy as np

    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)
    yield


MODEL_SIZES = dict(hidden_size=32, num_heads=4, num_kv_heads=2, intermediate_size=48)  # head_dim 8


@pytest.fixture(scope="session")
def small_model():
    """The suite's small random models: ``small_model(layout, seed, dtype=float64, num_layers=2,
    predicts_mask=False, **sizes)``. Decoder tests want ``predicts_mask=False`` (``never_predicts_mask``: a
    random model gives the mask token real probability, a trained one does not)."""
    from veridec.models import random_model
    from veridec.models.tiny import never_predicts_mask

    def make(layout: str = "llada", seed: int = 0, *, dtype=torch.float64, num_layers: int = 2,
             predicts_mask: bool = False, **sizes):
        model = random_model(layout, seed, dtype=dtype, num_layers=num_layers, **{**MODEL_SIZES, **sizes})
        return model if predicts_mask else never_predicts_mask(model)

    return make


class CountingModel:
    """Counts what a decoder asks of the model, independently of its trace (spec N8): every call, whole-canvas
    forwards (a forward or a prefill) and the query positions fed, summed over the batch."""

    def __init__(self, model):
        self.model, self.calls, self.full, self.positions = model, 0, 0, 0

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, x, attention_mask=None, **kw):
        self.calls, self.full, self.positions = self.calls + 1, self.full + 1, self.positions + x.numel()
        return self.model(x, attention_mask, **kw)

    def prefill(self, x, *args, **kw):
        self.calls, self.full, self.positions = self.calls + 1, self.full + 1, self.positions + x.numel()
        return self.model.prefill(x, *args, **kw)

    def forward_cached(self, tokens, *args, **kw):
        self.calls, self.positions = self.calls + 1, self.positions + tokens.numel()
        return self.model.forward_cached(tokens, *args, **kw)

    def counted(self) -> tuple[int, int, int]:
        """(model calls, full forwards, query positions), the order of ``assert_counted``."""
        return self.calls, self.full, self.positions


@pytest.fixture(scope="session")
def counting_model():
    """``counting_model(model)``: the model behind a proxy that counts its calls (``CountingModel``)."""
    return CountingModel


@pytest.fixture(scope="session")
def run_registered_check():
    """Run a check ``veridec verify`` registers (harness/checks) on given float32 and float64 models, so a test
    holds the same statement instead of restating it: ``run_registered_check(name, model32, model64, seed=0)``."""
    from veridec.harness.checks.registry import VerifyContext, all_checks

    def run(name: str, model32, model64, seed: int = 0, quick: bool = False):
        result = all_checks()[name].run(VerifyContext(model32, model64, seed, quick))
        print(result)
        assert result.passed, result
        return result

    return run


@pytest.fixture(scope="session")
def tiny_folders(tmp_path_factory):
    """One official-layout tiny checkpoint folder per layout (LLaDA sharded, Dream single-file)."""
    from veridec.models import write_tiny_checkpoint

    root = tmp_path_factory.mktemp("tiny")
    return {
        "llada": write_tiny_checkpoint(root / "llada", "llada", seed=1, max_shard_bytes=40_000),
        "dream": write_tiny_checkpoint(root / "dream", "dream", seed=2),
    }


@pytest.fixture(scope="session")
def speculative_quick(tmp_path_factory):
    """``veridec experiment speculative --quick`` run once in this process: (report, output folder)."""
    from veridec.harness.experiments import speculative

    out = tmp_path_factory.mktemp("speculative-quick")
    return speculative.run(out, quick=True, quiet=True), out


@pytest.fixture(scope="session")
def golden_checkpoints(tmp_path_factory):
    """(the golden data, its checkpoints loaded by veridec) for the tests that replay it, loaded once."""
    import json
    from pathlib import Path

    from tools.golden.checkpoints import load_checkpoints

    folder = Path(__file__).parent / "golden"
    golden = json.loads((folder / "golden.json").read_text())
    return golden, load_checkpoints(golden, folder, tmp_path_factory.mktemp("golden"))


@pytest.fixture(scope="session")
def wino_llada(tmp_path_factory):
    """The tiny LLaDA checkpoint WINO's golden data was recorded on (tests/golden/wino.json), loaded once."""
    import json
    from pathlib import Path

    from tools.golden.checkpoints import load_checkpoints

    folder = Path(__file__).parent / "golden"
    golden = json.loads((folder / "wino.json").read_text())
    return load_checkpoints(golden, folder, tmp_path_factory.mktemp("wino"))["llada"]


@pytest.fixture()
def cli(capsys):
    """The ``veridec`` command in this process: cli(*argv) -> (exit code, stdout, stderr); no exception may
    escape."""
    from veridec.harness.cli import main

    def run(*argv):
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run
