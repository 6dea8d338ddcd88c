"""Decoding rules: small pure functions from (logits, canvas) to the next canvas, shared by reference/ and
optimized/ (docs/design.md: a decoder is a rule applied to logits).

``common`` (the step result, the proposal, LLaDA's quota, ranking and top-k, hyperparameter checks), ``llada``
and ``dream`` (the official samplers' steps), ``parallel`` and ``step`` (the parallel rules and their shared
step), ``fastdllm`` (Fast-dLLM's parameters), ``presets`` (named operating points), ``drafts`` (speculative draft
trees), ``view`` (what a parallel rule sees). Imports only ``veridec.models``; both decoder paths import it."""
