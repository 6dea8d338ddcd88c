"""Decoding rules: small pure functions from (logits, canvas) to the next canvas, shared by reference/ and
optimized/ (docs/design.md: a decoder is a rule applied to logits).

``common`` (the step result, the proposal, LLaDA's quota, ranking, tie-aware top-k, entropy), ``filters`` (top-k
and top-p of logits), ``llada`` and ``dream`` (the official samplers' steps), ``sdar``, ``editing`` and ``wino``
(block diffusion's, LLaDA2.1's and WINO's steps), ``parallel`` and ``step`` (the parallel rules and their shared
step), ``fastdllm`` (Fast-dLLM's parameters), ``presets`` (named operating points), ``drafts`` (speculative draft
trees), ``view`` (what a parallel rule sees). Imports only ``veridec.checks``, ``veridec.models`` and
``veridec.trace``; both decoder paths import it."""
