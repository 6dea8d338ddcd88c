"""Spec oracle for the reference samplers of spec/sequential.md (SQ1 LLaDA, SQ2 Dream).

Written ONLY from spec/notation.md and spec/sequential.md, without reading veridec or the official
code, so that it cannot inherit their mistakes.  It is deliberately naive: plain Python lists and
loops, ``math``, ``struct`` (float32 rounding) and ``fractions.Fraction``.  No torch, no numpy,
nothing from veridec.

Conventions
-----------
* A canvas is ``list[list[int]]`` of shape ``[B][L]`` (N1); logits are ``list[list[list[float]]]``
  of shape ``[B][L][V]`` (N3, token-aligned: index i scores token i; for Dream the N6 shift is the
  adapter's job, the oracle receives already-aligned logits).
* Everything is float64 (N7) except where the spec explicitly prescribes float32 arithmetic
  (Dream's time grid and transfer count, SQ2.2-SQ2.4), which is emulated with ``f32`` below.
  Where a formula is rational (schedules, CFG with rational inputs, Dream's exact transfer count,
  Dream's filtered distribution given as weights) ``Fraction`` is used.
* Ties (SQ0.4 / N5): token argmax -> lowest token id; position top-k -> lowest position.  Only
  ``ties="lowest"`` is modelled; ``ties="torch"`` is implementation-defined and cannot be an oracle.
* Randomness is an explicit input (SQ0.2 cannot be reproduced without torch):
  - LLaDA: Gumbel uniforms ``u[b][i][v]`` (float64 in (0,1)) and remasking uniforms ``r[b][i]``.
  - Dream: the oracle returns the exact distribution each draw is made from; a test that wants to
    replay a run passes the tokens / positions / uniforms the production code drew, and the oracle
    checks that each of them had positive probability and recomputes everything else.

Readings chosen where the spec is open are marked ``READING:`` in comments, each stating the
reading it takes.
"""

from __future__ import annotations

import itertools
import math
import struct
from fractions import Fraction

from .data import load

NEG_INF = float("-inf")
POS_INF = float("inf")

__all__ = [
    # helpers
    "f32", "argmax_lowest", "topk_positions_lowest", "softmax", "selection_gap",
    # SQ1 LLaDA
    "llada_check_params", "llada_canvas", "llada_blocks", "llada_schedule",
    "llada_schedule_tokens_per_step", "cfg_uncond_canvas", "cfg_combine", "llada_gumbel_scores",
    "llada_propose", "llada_step", "llada_generate",
    # SQ2 Dream
    "dream_total_length", "dream_canvas", "dream_timesteps", "dream_timesteps_exact",
    "dream_transfer_count", "dream_transfer_count_exact", "dream_row_counts",
    "dream_origin_reveal_probability", "dream_origin_revealed",
    "dream_filtered_distribution", "dream_filtered_distribution_exact", "dream_confidence",
    "dream_sample_tokens", "dream_select_positions", "dream_position_distribution",
    "dream_position_sequence_probability", "dream_position_set_probability", "dream_step",
    "dream_origin_step", "dream_generate",
    # data
    "toy_model", "worked_examples", "replay",
]


# ----------------------------------------------------------------------------------------------
# Generic helpers
# ----------------------------------------------------------------------------------------------

def f32(x):
    """Round a Python number to the nearest IEEE float32 (round-half-even) and return it as float.

    Used only where the spec prescribes float32 arithmetic (SQ2.2 time grid, SQ2.3 reveal
    probability, SQ2.4 transfer count).  One binary operation on float32 operands evaluated in
    float64 and then rounded with ``f32`` equals the float32 operation (double rounding is
    innocuous for + - * / at these precisions).
    """
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def _check_no_nan(values, what):
    for v in values:
        if isinstance(v, float) and math.isnan(v):
            # READING: the spec never says how NaN scores rank; the oracle refuses them.
            raise ValueError(what + " contains NaN; the spec does not define its rank")


def argmax_lowest(values):
    """SQ0.4 / N5 token argmax: index of the first maximum of ``values`` (list of numbers).

    ``-inf`` entries are ordinary values (an all ``-inf`` list returns 0).  NaN is refused.
    """
    _check_no_nan(values, "argmax input")
    best = 0
    for j in range(1, len(values)):
        if values[j] > values[best]:
            best = j
    return best


def topk_positions_lowest(scores, k):
    """SQ0.4 position selection, ``ties="lowest"``: the ``k`` largest of ``scores`` (list [L]).

    Returns the positions in rank order (descending score, equal scores by ascending position).
    ``-inf`` entries take part like any value (SQ1.7: with too few candidates they are selected,
    lowest positions first).  ``k`` larger than ``len(scores)`` is an error.
    """
    _check_no_nan(scores, "position scores")
    if k < 0 or k > len(scores):
        raise ValueError("k=%r outside [0, %d]" % (k, len(scores)))
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return order[:k]


def softmax(logits):
    """float64 softmax of a list of floats (``-inf`` allowed -> probability 0).

    If every entry is ``-inf`` the result is a list of NaN (0/0), which ranking helpers refuse.
    """
    m = max(logits)
    if m == NEG_INF:
        return [float("nan")] * len(logits)
    if m == POS_INF:
        raise ValueError("softmax of +inf logits is undefined")
    e = [math.exp(x - m) for x in logits]
    z = 0.0
    for x in e:
        z += x
    return [x / z for x in e]


def selection_gap(scores, selected, candidates):
    """SQ0.1 selection gap of one row: min score over ``selected`` minus max score over the
    candidates that were not selected; ``+inf`` when no candidate is left.

    scores: list[L] of the rule's ranking score; selected: list of positions committed this step;
    candidates: list of positions that could have been committed (LLaDA: masked and before the
    block end; Dream: masked).  READING: returns None when nothing was selected (undefined).
    """
    if not selected:
        return None
    chosen = set(selected)
    left = [scores[i] for i in candidates if i not in chosen]
    if not left:
        return POS_INF
    return min(scores[i] for i in selected) - max(left)


def _float64_exp(x):
    """exp in float64 semantics: overflow -> +inf instead of OverflowError, exp(-inf) = 0."""
    if x == NEG_INF:
        return 0.0
    try:
        return math.exp(x)
    except OverflowError:
        return POS_INF


# ----------------------------------------------------------------------------------------------
# SQ1  LLaDA generate
# ----------------------------------------------------------------------------------------------

def llada_check_params(*, steps, gen_length, block_length, temperature=0.0, cfg_scale=0.0,
                       remasking="low_confidence", logits_eos_inf=False,
                       confidence_eos_eot_inf=False, eos_id=None, eot_id=None,
                       tokens_per_step=None):
    """SQ0.6 + SQ1.2: raise ValueError for arguments the spec rules out.  Returns None.

    Spec'd: gen_length divisible by block_length; steps divisible by the number of blocks;
    remasking in {low_confidence, random}; EOS flags need the ids (test name
    ``test_eos_flags_need_eos_ids``).  READING (ranges the spec does not state, chosen as the
    minimal domain where the formulas are defined): gen_length >= 1, block_length >= 1, steps >= G
    (S >= 1), temperature >= 0, cfg_scale >= 0, tokens_per_step >= 1.  With ``tokens_per_step``
    the ``steps`` divisibility is NOT checked ("steps is not used", SQ1.3), but steps must still be an
    integer >= 1 (SQ0.6).
    """
    if not isinstance(gen_length, int) or gen_length < 1:
        raise ValueError("gen_length must be an int >= 1")
    if not isinstance(block_length, int) or block_length < 1:
        raise ValueError("block_length must be an int >= 1")
    if gen_length % block_length != 0:
        raise ValueError("gen_length must be divisible by block_length")
    n_blocks = gen_length // block_length
    if tokens_per_step is None:
        if not isinstance(steps, int) or steps < 1 or steps % n_blocks != 0:
            raise ValueError("steps must be a positive multiple of gen_length // block_length")
    else:
        if not isinstance(steps, int) or steps < 1:
            raise ValueError("steps must be an int >= 1")
        if not isinstance(tokens_per_step, int) or tokens_per_step < 1:
            raise ValueError("tokens_per_step must be an int >= 1")
    if temperature < 0:
        raise ValueError("temperature must be >= 0")
    if cfg_scale < 0:
        raise ValueError("cfg_scale must be >= 0")
    if remasking not in ("low_confidence", "random"):
        raise ValueError("remasking must be 'low_confidence' or 'random'")
    if logits_eos_inf and eos_id is None:
        raise ValueError("logits_eos_inf needs eos_id")
    if confidence_eos_eot_inf and (eos_id is None or eot_id is None):
        raise ValueError("confidence_eos_eot_inf needs eos_id and eot_id")


def llada_canvas(prompt, attention_mask, gen_length, mask_id):
    """SQ1.1 canvas.

    prompt: list[B][P] of ints (already left-padded, N2); attention_mask: list[B][P] of 0/1 or None
    (None = all ones); returns ``(x, attn, prompt_index)``:
      x: list[B][P+gen_length] = prompt + [mask_id]*gen_length,
      attn: list[B][P+gen_length] = attention mask extended with ones,
      prompt_index: list[B][P+gen_length] of bool, ``x != mask_id`` at the start (prompt AND padding;
      masks inside the prompt are not prompt).
    """
    x = [list(row) + [mask_id] * gen_length for row in prompt]
    if attention_mask is None:
        attn = [[1] * len(r) for r in x]
    else:
        attn = [list(a) + [1] * gen_length for a in attention_mask]
    prompt_index = [[tok != mask_id for tok in row] for row in x]
    return x, attn, prompt_index


def llada_blocks(prompt_length, gen_length, block_length, steps=None):
    """SQ1.2 blocks: list of ``(block_start, block_end)`` canvas positions, left to right, and
    ``S = steps / G`` (None when ``steps`` is None, i.e. with tokens_per_step).

    Block b covers positions ``[P + b*block_length, P + (b+1)*block_length)``.
    """
    if gen_length % block_length != 0:
        raise ValueError("gen_length must be divisible by block_length")
    g = gen_length // block_length
    blocks = [(prompt_length + b * block_length, prompt_length + (b + 1) * block_length)
              for b in range(g)]
    s = None
    if steps is not None:
        if steps % g != 0:
            raise ValueError("steps must be divisible by the number of blocks")
        s = steps // g
    return blocks, s


def llada_schedule(mask_count, steps):
    """SQ1.3 schedule of one row and one block: ``k_i = floor(M/S) + [i < M mod S]``, i in [0, S).

    mask_count: M (int >= 0), the row's masks inside the block at the block's start;
    steps: S (int >= 1), steps per block.  Returns list[int] of length S summing to M; the
    remainder goes to the FIRST ``M mod S`` steps; when S > M the trailing steps commit 0.
    """
    if steps < 1:
        raise ValueError("steps per block must be >= 1")
    base, rem = divmod(mask_count, steps)
    return [base + (1 if i < rem else 0) for i in range(steps)]


def llada_schedule_tokens_per_step(mask_count, k):
    """SQ1.3 fixed top-k schedule (``tokens_per_step = k``): k per step over ``ceil(M/k)`` steps,
    the last taking the remainder.  Returns list[int] (empty when M = 0).

    READING: M = 0 gives zero steps (no forward for that block).
    """
    if k < 1:
        raise ValueError("tokens_per_step must be >= 1")
    n = -(-mask_count // k)
    out = [k] * n
    if n:
        out[-1] = mask_count - k * (n - 1)
    return out


def cfg_uncond_canvas(x, prompt_index, mask_id):
    """SQ1.5 unconditional input: ``x`` (list[B][L]) with every ``prompt_index`` position set to
    ``mask_id`` (prompt_index from SQ1.1, i.e. prompt AND padding; tokens generated so far and
    filled prompt masks are kept)."""
    return [[mask_id if prompt_index[b][i] else x[b][i] for i in range(len(x[b]))]
            for b in range(len(x))]


def cfg_combine(cond_logits, uncond_logits, w):
    """SQ1.5 classifier-free guidance: ``l = l_u + (w + 1) (l_c - l_u)`` elementwise.

    cond_logits, uncond_logits: list[B][L][V] (Fractions give an exact result, floats float64);
    w: cfg_scale (> 0 when used).  Returns list[B][L][V].
    """
    out = []
    for b in range(len(cond_logits)):
        rows = []
        for i in range(len(cond_logits[b])):
            rows.append([uncond_logits[b][i][v] + (w + 1) * (cond_logits[b][i][v] - uncond_logits[b][i][v])
                         for v in range(len(cond_logits[b][i]))])
        out.append(rows)
    return out


def llada_gumbel_scores(logits_row, uniforms_row, temperature):
    """SQ1.4 step 2, one position: ``g(l)_v = exp(l_v) / (-log u_v)^T`` in float64 (T > 0).

    logits_row: list[V] floats (``-inf`` allowed -> 0); uniforms_row: list[V] floats in (0,1).
    READING: the formula is taken literally in float64: exp overflows to +inf (logits > ~709.78)
    and underflows to 0 (< ~-745), and the resulting ties go to the lowest token id.
    """
    out = []
    for v in range(len(logits_row)):
        u = uniforms_row[v]
        if not (0.0 < u < 1.0):
            raise ValueError("Gumbel uniforms must lie in (0, 1)")
        out.append(_float64_exp(logits_row[v]) / ((-math.log(u)) ** temperature))
    return out


def llada_propose(logits_row, temperature, uniforms_row=None):
    """SQ1.4 step 2, one position: the proposal ``argmax(g(l))`` (first maximum).

    At temperature 0 ``g(l) = l``; otherwise the Gumbel-max score of ``llada_gumbel_scores``.
    """
    if temperature == 0:
        return argmax_lowest(logits_row)
    if uniforms_row is None:
        raise ValueError("temperature > 0 needs Gumbel uniforms")
    return argmax_lowest(llada_gumbel_scores(logits_row, uniforms_row, temperature))


def llada_step(logits, canvas, *, block_end, num_transfer, temperature, remasking, mask_id,
               eos_id=None, eot_id=None, logits_eos_inf=False, confidence_eos_eot_inf=False,
               gumbel_uniforms=None, remask_uniforms=None):
    """SQ1.4 one LLaDA step (after the forward and CFG of SQ1.5).

    logits: list[B][L][V] floats (already CFG-combined); canvas: list[B][L] ints;
    block_end: int, positions >= block_end are not candidates; num_transfer: list[B] ints (k_i per
    row); temperature: float >= 0; remasking: 'low_confidence' | 'random';
    gumbel_uniforms: list[B][L][V] floats in (0,1), required when temperature > 0;
    remask_uniforms: list[B][L] floats in [0,1), required for remasking='random'.

    Returns dict with, per row b:
      'canvas'      list[B][L]  the new canvas;
      'proposals'   list[B][L]  x̂ after step 5 (= x at unmasked positions);
      'confidence'  list[B][L]  c after step 5 (-inf at non-candidates);
      'selected'    list[B][list] the k_i positions chosen, rank order (SQ0.4);
      'committed'   list[B][list] the selected positions that went from mask to a non-mask token,
                    rank order (SQ0.1);
      'tokens'      list[B][list] their tokens; 'committed_confidence' list[B][list];
      'selection_gap' list[B]  (SQ0.1, see ``selection_gap``).
    """
    B = len(logits)
    out = {"canvas": [], "proposals": [], "confidence": [], "selected": [], "committed": [],
           "tokens": [], "committed_confidence": [], "selection_gap": []}
    for b in range(B):
        L = len(canvas[b])
        # 1. logits_eos_inf: l[:, :, eos] = -inf (changes tokens AND the softmax of step 4)
        l = [list(map(float, logits[b][i])) for i in range(L)]
        if logits_eos_inf:
            for i in range(L):
                l[i][eos_id] = NEG_INF
        # READING: steps 2-4 are computed at masked positions only.  At unmasked positions step 5
        # overwrites them anyway (x̂ = x, c = -inf), so the result is the same; skipping them only
        # avoids refusing NaN logits (e.g. CFG of -inf logits) where they cannot matter.
        masked = [canvas[b][i] == mask_id for i in range(L)]
        # 2. token proposal
        prop = list(canvas[b])
        for i in range(L):
            if masked[i]:
                u_row = None if gumbel_uniforms is None else gumbel_uniforms[b][i]
                prop[i] = llada_propose(l[i], temperature, u_row)
        # 3. confidence_eos_eot_inf (SQ1.6): after the proposal, changes scores only.
        #    T == 0: g(l) is l itself, so BOTH eos and eot become -inf in l.
        #    T > 0 : only l[eot] = -inf (the eos assignment hits the noisy copy, which is unused).
        if confidence_eos_eot_inf:
            for i in range(L):
                if temperature == 0:
                    l[i][eos_id] = NEG_INF
                l[i][eot_id] = NEG_INF
        # 4. score
        c = [NEG_INF] * L
        for i in range(L):
            if not masked[i]:
                continue
            if remasking == "low_confidence":
                c[i] = softmax(l[i])[prop[i]]  # softmax of l, NOT of l/T
            elif remasking == "random":
                if remask_uniforms is None:
                    raise ValueError("remasking='random' needs remask uniforms")
                c[i] = float(remask_uniforms[b][i])
            else:
                raise ValueError("remasking must be 'low_confidence' or 'random'")
        # 5. c[block_end:] = -inf; x̂ = x and c = -inf at unmasked positions (done above)
        for i in range(L):
            if i >= block_end:
                c[i] = NEG_INF
        # 6. the k_i largest c take their proposals (ties: lowest position); only candidates are ever
        #    selected (SQ1.7: called with more than there are, every candidate is)
        n_candidates = sum(1 for i in range(L) if canvas[b][i] == mask_id and i < block_end)
        sel = topk_positions_lowest(c, min(num_transfer[b], n_candidates))
        new = list(canvas[b])
        for i in sel:
            new[i] = prop[i]
        committed = [i for i in sel if canvas[b][i] == mask_id and new[i] != mask_id]
        cands = [i for i in range(L) if canvas[b][i] == mask_id and i < block_end]
        out["canvas"].append(new)
        out["proposals"].append(prop)
        out["confidence"].append(c)
        out["selected"].append(sel)
        out["committed"].append(committed)
        out["tokens"].append([new[i] for i in committed])
        out["committed_confidence"].append([c[i] for i in committed])
        out["selection_gap"].append(selection_gap(c, [i for i in sel if i in cands], cands))
    return out


def _take(source, index):
    """Random inputs for step ``index``: a callable(index) or a list indexed by step; None stays None."""
    if source is None:
        return None
    if callable(source):
        return source(index)
    return source[index]


def llada_generate(model, prompt, attention_mask=None, *, steps=128, gen_length=128,
                   block_length=128, temperature=0.0, cfg_scale=0.0, remasking="low_confidence",
                   mask_id, eos_id=None, eot_id=None, logits_eos_inf=False,
                   confidence_eos_eot_inf=False, tokens_per_step=None, gumbel_uniforms=None,
                   remask_uniforms=None):
    """SQ1 LLaDA ``generate`` driven by explicit randomness (ties="lowest").

    model: callable ``(canvas list[B'][L], attention_mask list[B'][L]) -> logits list[B'][L][V]``
    (token-aligned, N3).  prompt: list[B][P] ints (left-padded); attention_mask: list[B][P] or None.
    gumbel_uniforms / remask_uniforms: None, a list indexed by the global step counter, or a
    callable(step_counter) giving ``u[B][L][V]`` / ``r[B][L]`` for that step.

    Returns dict: 'canvas' list[B][P+gen_length]; 'steps' list of per-step records (block index,
    step in block, num_transfer, and llada_step's outputs); 'full_forwards' (int) and
    'forward_rows' (rows evaluated: 2B per forward with CFG, B otherwise).
    """
    llada_check_params(steps=steps, gen_length=gen_length, block_length=block_length,
                       temperature=temperature, cfg_scale=cfg_scale, remasking=remasking,
                       logits_eos_inf=logits_eos_inf, confidence_eos_eot_inf=confidence_eos_eot_inf,
                       eos_id=eos_id, eot_id=eot_id, tokens_per_step=tokens_per_step)
    B = len(prompt)
    P = len(prompt[0]) if B else 0
    x, attn, prompt_index = llada_canvas(prompt, attention_mask, gen_length, mask_id)
    blocks, S = llada_blocks(P, gen_length, block_length, None if tokens_per_step else steps)
    records = []
    forwards = 0
    rows = 0
    counter = 0
    for bi, (start, end) in enumerate(blocks):
        M = [sum(1 for i in range(start, end) if x[b][i] == mask_id) for b in range(B)]
        if tokens_per_step is None:
            sched = [llada_schedule(M[b], S) for b in range(B)]
            n_steps = S
        else:
            sched = [llada_schedule_tokens_per_step(M[b], tokens_per_step) for b in range(B)]
            # READING: rows of one batch share the forward; the block runs the longest row
            # schedule and shorter rows commit 0 at the extra steps.
            n_steps = max([len(s) for s in sched] + [0])
            sched = [s + [0] * (n_steps - len(s)) for s in sched]
        for si in range(n_steps):
            if cfg_scale > 0:
                un = cfg_uncond_canvas(x, prompt_index, mask_id)
                both = model([list(r) for r in x] + un, [list(a) for a in attn] + [list(a) for a in attn])
                logits = cfg_combine(both[:B], both[B:], cfg_scale)
                rows += 2 * B
            else:
                logits = model([list(r) for r in x], [list(a) for a in attn])
                rows += B
            forwards += 1
            res = llada_step(logits, x, block_end=end, num_transfer=[sched[b][si] for b in range(B)],
                             temperature=temperature, remasking=remasking, mask_id=mask_id,
                             eos_id=eos_id, eot_id=eot_id, logits_eos_inf=logits_eos_inf,
                             confidence_eos_eot_inf=confidence_eos_eot_inf,
                             gumbel_uniforms=_take(gumbel_uniforms, counter) if temperature > 0 else None,
                             remask_uniforms=_take(remask_uniforms, counter) if remasking == "random" else None)
            x = res["canvas"]
            res.update(block=bi, step_in_block=si, num_transfer=[sched[b][si] for b in range(B)])
            records.append(res)
            counter += 1
    return {"canvas": x, "steps": records, "full_forwards": forwards, "forward_rows": rows}


# ----------------------------------------------------------------------------------------------
# SQ2  Dream diffusion_generate
# ----------------------------------------------------------------------------------------------

def dream_total_length(prompt_length, max_length=None, max_new_tokens=None):
    """SQ2.1: ``P + max_new_tokens``, else ``max_length``, else ``P + 20``; must exceed P."""
    if max_new_tokens is not None:
        total = prompt_length + max_new_tokens
    elif max_length is not None:
        total = max_length
    else:
        total = prompt_length + 20
    if total <= prompt_length:
        raise ValueError("total length must exceed the prompt length")
    return total


def dream_canvas(prompt, attention_mask, mask_id, max_length=None, max_new_tokens=None):
    """SQ2.1 canvas: prompt (list[B][P], left-padded) right-filled with masks to the total length;
    attention mask (list[B][P] or None) extended with ones.  Returns ``(x, attn)``."""
    P = len(prompt[0])
    total = dream_total_length(P, max_length, max_new_tokens)
    x = [list(r) + [mask_id] * (total - P) for r in prompt]
    if attention_mask is None:
        attn = [[1] * total for _ in prompt]
    else:
        attn = [list(a) + [1] * (total - P) for a in attention_mask]
    return x, attn


def dream_timesteps_exact(steps, eps):
    """SQ2.2 exact (rational) grid ``1 + i (eps - 1) / steps``, i = 0..steps, as Fractions
    (``eps`` taken as the exact value of the given Python number)."""
    e = Fraction(eps)
    return [Fraction(1) + i * (e - 1) / steps for i in range(steps + 1)]


def dream_timesteps(steps, eps):
    """SQ2.2 ``linspace(1, eps, steps + 1)`` in float32: list[float] of length steps + 1, formed as the
    spec states: h = fl32((fl32(eps) - 1) / steps); t_i = fl32(1 + h i) for i < (steps + 1) // 2,
    else t_i = fl32(fl32(eps) - h (steps - i)), each one rounding of the exact value (the float64
    product-sum below is exact: h has 24 significant bits, i <= 2^20).
    """
    if steps < 1:
        raise ValueError("steps must be >= 1")
    e = f32(eps)
    h = f32(f32(e - 1.0) / f32(steps))
    half = (steps + 1) // 2
    return [f32(1.0 + h * i) if i < half else f32(e - h * (steps - i)) for i in range(steps + 1)]


def dream_transfer_count(mask_counts, step, steps, eps):
    """SQ2.4 batch transfer count ``k = int(m̄ (1 - s/t))`` in float32 arithmetic, ``int(m̄)`` on the
    last step (``step == steps - 1``).

    mask_counts: list[B] of ints, masks per row (whole canvas) before the step; step in [0, steps).
    m̄ = float32(sum / B); then float32 ops ``s/t``, ``1 - .``, ``m̄ * .``, truncation toward 0.
    """
    B = len(mask_counts)
    mbar = f32(sum(mask_counts) / B)
    if step == steps - 1:
        return int(mbar)
    ts = dream_timesteps(steps, eps)
    t, s = ts[step], ts[step + 1]
    ratio = f32(s / t)
    one_minus = f32(1.0 - ratio)
    return int(f32(mbar * one_minus))


def dream_transfer_count_exact(mask_counts, step, steps, eps):
    """The same count in exact rational arithmetic (NOT the spec's; for comparison only):
    ``floor(mean * (1 - s/t))`` with the exact grid, ``floor(mean)`` on the last step."""
    mean = Fraction(sum(mask_counts), len(mask_counts))
    if step == steps - 1:
        return math.floor(mean)
    ts = dream_timesteps_exact(steps, eps)
    return math.floor(mean * (1 - ts[step + 1] / ts[step]))


def dream_row_counts(k, mask_counts):
    """SQ2.4 deviation: the batch count ``k`` clamped to each row's masks: list[B] of
    ``min(k, masks_b)`` (also the tokens_per_step rule)."""
    return [min(k, m) for m in mask_counts]


def dream_origin_reveal_probability(step, steps, eps):
    """SQ2.3: ``1 - s/t`` (float32 arithmetic) on steps before the last, 1 on the last step."""
    if step == steps - 1:
        return 1.0
    ts = dream_timesteps(steps, eps)
    return f32(1.0 - f32(ts[step + 1] / ts[step]))


def dream_origin_revealed(canvas, uniforms, p, mask_id):
    """SQ2.3: which masked positions are revealed given the uniforms.

    canvas list[B][L]; uniforms list[B][L] (float32 values in [0,1); only masked entries read;
    the official draw is one vector over the masks in row-major order); p from
    ``dream_origin_reveal_probability``.  READING: revealed iff ``u < p`` (strict; so u in [0,1)
    reveals everything when p = 1).  Returns list[B][list of positions].
    """
    return [[i for i in range(len(canvas[b])) if canvas[b][i] == mask_id and uniforms[b][i] < p]
            for b in range(len(canvas))]


def _filter_keep(keys, probs, top_p, top_k):
    """Shared top-p then top-k filter of SQ2.5 on one position.

    keys: list[V] ranking keys, monotone in the tempered logits (the tempered logits themselves, or
    exact weights exp(l/T)); probs: function(keys) -> unfiltered probabilities list[V] (top-p reads
    them).
    Returns the final kept mask list[V] of bool.
    """
    V = len(keys)
    keep = [True] * V
    if top_p is not None:
        p = probs(keys)
        # descending key order, equal keys by ascending token id (N5)
        order = sorted(range(V), key=lambda v: (_neg(keys[v]), v))
        cum = 0
        crossed = False
        for v in order:
            if crossed:
                keep[v] = False
                continue
            cum = cum + p[v]
            if cum > top_p:  # "exceeds": strict; the crossing token is kept
                crossed = True
    if top_k is not None:
        if top_k < 1:
            raise ValueError("top_k must be >= 1")
        kept_keys = [keys[v] for v in range(V) if keep[v]]
        kk = min(top_k, V)  # READING: top_k > V keeps everything
        if kk <= len(kept_keys):
            kth = sorted(kept_keys, key=_neg)[kk - 1]
            for v in range(V):
                if keep[v] and keys[v] < kth:  # keep keys >= the k-th largest: boundary ties kept
                    keep[v] = False
        # fewer kept tokens than k: the k-th largest is a removed one (dtype minimum), all kept
        # tokens are >= it, nothing changes.
    return keep


def _neg(x):
    return -x


def dream_filtered_distribution(logits, temperature=0.0, top_p=None, top_k=None):
    """SQ2.5 probabilities of one position after temperature, top-p, top-k (float64).

    logits: list[V] floats; temperature: T >= 0 (T > 0 divides the logits; T == 0 does not);
    top_p: None or a number (keep the smallest descending-logit prefix whose cumulative
    probability strictly exceeds top_p, crossing token included; whole vocabulary when no prefix
    exceeds it); top_k: None or int >= 1 (keep logits >= the k-th largest, ties kept).
    Removed tokens get probability exactly 0 (the dtype-minimum fill underflows to 0).
    Returns list[V]: at T > 0 the distribution the token is drawn from; at T == 0 the
    probabilities the confidences are computed from (the token is their argmax).
    """
    if temperature < 0:
        raise ValueError("temperature must be >= 0")
    l = [float(x) / temperature for x in logits] if temperature > 0 else [float(x) for x in logits]
    keep = _filter_keep(l, lambda keys: softmax(keys), top_p, top_k)
    return softmax([l[v] if keep[v] else NEG_INF for v in range(len(l))])


def dream_filtered_distribution_exact(weights, inv_temperature=None, top_p=None, top_k=None):
    """Exact (Fraction) version of ``dream_filtered_distribution`` for logits given as
    ``logits = log(weights)``.

    weights: list[V] of positive Fractions/ints (exp of the logits); inv_temperature: None for
    T == 0 (no scaling) or the integer n = 1/T (T > 0), so that softmax(l/T) = w^n / sum;
    top_p: None or a Fraction; top_k: None or int.  Returns list[V] of Fractions.
    """
    w = [Fraction(x) for x in weights]
    if inv_temperature is not None:
        if int(inv_temperature) != inv_temperature or inv_temperature < 1:
            raise ValueError("inv_temperature must be a positive integer")
        w = [x ** int(inv_temperature) for x in w]

    def probs(keys):
        z = sum(k for k in keys)
        return [k / z for k in keys]

    keep = _filter_keep(w, probs, None if top_p is None else Fraction(top_p), top_k)
    z = sum(w[v] for v in range(len(w)) if keep[v])
    return [w[v] / z if keep[v] else Fraction(0) for v in range(len(w))]


def dream_confidence(alg, probs, token):
    """SQ2.4 confidence of one position from its filtered probabilities (list[V]):
    maskgit_plus -> probs[token]; topk_margin -> top1 - top2 (0 for the second when V == 1);
    entropy -> sum_v p log(p + 1e-10) (float; larger is more confident).
    Works with Fractions for maskgit_plus / topk_margin (exact)."""
    if alg == "maskgit_plus":
        return probs[token]
    if alg == "topk_margin":
        s = sorted(probs, reverse=True)
        return s[0] - (s[1] if len(s) > 1 else 0)
    if alg == "entropy":
        tot = 0.0
        for p in probs:
            tot += float(p) * math.log(float(p) + 1e-10)
        return tot
    raise ValueError("alg must be maskgit_plus, topk_margin or entropy")


def dream_sample_tokens(logits, temperature=0.0, top_p=None, top_k=None, alg="maskgit_plus",
                        sampled_token=None):
    """SQ2.5 ``sample_tokens`` for one position.

    Returns ``(token, confidence, probs)``: probs = ``dream_filtered_distribution``; at T == 0 the
    token is argmax(probs) (first maximum); at T > 0 the token must be supplied
    (``sampled_token``, e.g. the production's draw) and must have positive probability; it is
    drawn from ``probs``.  confidence = ``dream_confidence(alg, probs, token)`` (``alg=None`` for
    origin: confidence None).
    """
    probs = dream_filtered_distribution(logits, temperature, top_p, top_k)
    if temperature == 0:
        token = argmax_lowest(probs)
    else:
        if sampled_token is None:
            raise ValueError("temperature > 0: pass the sampled token; its law is `probs`")
        if not probs[sampled_token] > 0:
            raise ValueError("sampled token %r has probability 0" % sampled_token)
        token = sampled_token
    conf = None if alg in (None, "origin") else dream_confidence(alg, probs, token)
    return token, conf, probs


def dream_select_positions(confidences, k):
    """SQ2.4, alg_temp None or 0: per row the ``k[b]`` highest scores, ties to the lowest position.

    confidences: list[B][L] (-inf at unmasked positions); k: int (same for all rows) or list[B]
    (already clamped).  Returns list[B][list of positions] in rank order.
    """
    ks = k if isinstance(k, list) else [k] * len(confidences)
    return [topk_positions_lowest(confidences[b], ks[b]) for b in range(len(confidences))]


def dream_position_distribution(scores, alg_temp):
    """SQ2.4 sampled positions: ``softmax(score / alg_temp)`` over one row (list[L], -inf at
    unmasked positions -> probability 0).  The first of the k draws without replacement has this
    law; later draws renormalise over the positions not yet drawn
    (``dream_position_sequence_probability``)."""
    if not alg_temp > 0:
        raise ValueError("alg_temp must be > 0 for sampled positions")
    return softmax([s / alg_temp if s != NEG_INF else NEG_INF for s in scores])


def dream_position_sequence_probability(probs, sequence):
    """Probability that draws without replacement from ``probs`` (list[L]) give exactly the
    ordered ``sequence`` of positions: prod_r p_{j_r} / (1 - sum_{q<r} p_{j_q})."""
    tot = 1
    used = 0
    for j in sequence:
        tot = tot * probs[j] / (1 - used)
        used = used + probs[j]
    return tot


def dream_position_set_probability(probs, positions):
    """Probability that k = len(positions) draws without replacement yield that SET (sum over
    orderings; naive, for tiny k)."""
    return sum(dream_position_sequence_probability(probs, perm)
               for perm in itertools.permutations(positions))


def dream_step(logits, canvas, *, alg, k, mask_id, temperature=0.0, top_p=None, top_k=None,
               alg_temp=None, sampled_tokens=None, chosen_positions=None):
    """SQ2.4 one step of maskgit_plus / topk_margin / entropy.

    logits: list[B][L][V] token-aligned; canvas: list[B][L]; k: the batch count (from
    ``dream_transfer_count`` or tokens_per_step), clamped per row to the row's masks;
    sampled_tokens: list[B][L] (T > 0: the draw at every masked position); chosen_positions:
    list[B][list] (alg_temp > 0: the k drawn positions, in draw order).

    Returns dict: 'canvas'; 'proposals' list[B][L] (None at unmasked); 'probs' list[B][L]
    (filtered distributions, None at unmasked); 'confidence' list[B][L] (-inf at unmasked);
    'k' list[B]; 'selected' list[B][list]; 'position_probs' list[B][L] or None (alg_temp > 0);
    'selection_probability' list[B] (probability of the supplied ordered draw, alg_temp > 0).
    """
    B = len(canvas)
    masks = [sum(1 for t in row if t == mask_id) for row in canvas]
    ks = dream_row_counts(k, masks)
    out = {"canvas": [], "proposals": [], "probs": [], "confidence": [], "k": ks,
           "selected": [], "position_probs": [], "selection_probability": []}
    for b in range(B):
        L = len(canvas[b])
        prop = [None] * L
        dist = [None] * L
        conf = [NEG_INF] * L
        for i in range(L):
            if canvas[b][i] == mask_id:
                st = None if sampled_tokens is None else sampled_tokens[b][i]
                tok, c, p = dream_sample_tokens(logits[b][i], temperature, top_p, top_k, alg, st)
                prop[i], conf[i], dist[i] = tok, c, p
        new = list(canvas[b])
        if ks[b] > 0:
            if alg_temp is None or alg_temp == 0:
                sel = topk_positions_lowest(conf, ks[b])
                pos_probs, sel_prob = None, None
            else:
                pos_probs = dream_position_distribution(conf, alg_temp)
                if chosen_positions is None:
                    raise ValueError("alg_temp > 0: pass the drawn positions; their law is position_probs")
                sel = list(chosen_positions[b])
                if len(sel) != ks[b] or len(set(sel)) != len(sel):
                    raise ValueError("row %d: expected %d distinct drawn positions" % (b, ks[b]))
                sel_prob = dream_position_sequence_probability(pos_probs, sel)
                if not sel_prob > 0:
                    raise ValueError("row %d: drawn positions have probability 0" % b)
            for i in sel:
                new[i] = prop[i]
        else:
            sel, pos_probs, sel_prob = [], None, None
        out["canvas"].append(new)
        out["proposals"].append(prop)
        out["probs"].append(dist)
        out["confidence"].append(conf)
        out["selected"].append(sel)
        out["position_probs"].append(pos_probs)
        out["selection_probability"].append(sel_prob)
    return out


def dream_origin_step(logits, canvas, *, step, steps, eps, mask_id, uniforms, temperature=0.0,
                      top_p=None, top_k=None, sampled_tokens=None):
    """SQ2.3 one ``origin`` step: reveal masked positions with ``u < p`` and give them
    ``sample_tokens`` tokens (argmax at T == 0; supplied draws at T > 0).  uniforms list[B][L].
    Returns dict 'canvas', 'p', 'revealed' list[B][list], 'probs' list[B][L] (None elsewhere)."""
    p = dream_origin_reveal_probability(step, steps, eps)
    rev = dream_origin_revealed(canvas, uniforms, p, mask_id)
    new = [list(r) for r in canvas]
    probs = [[None] * len(r) for r in canvas]
    for b in range(len(canvas)):
        for i in rev[b]:
            st = None if sampled_tokens is None else sampled_tokens[b][i]
            tok, _, pr = dream_sample_tokens(logits[b][i], temperature, top_p, top_k, None, st)
            new[b][i] = tok
            probs[b][i] = pr
    return {"canvas": new, "p": p, "revealed": rev, "probs": probs}


def dream_generate(model, prompt, attention_mask=None, *, mask_id, max_length=None,
                   max_new_tokens=None, steps=512, eps=1e-3, alg="origin", alg_temp=None,
                   temperature=0.0, top_p=None, top_k=None, tokens_per_step=None,
                   origin_uniforms=None, sampled_tokens=None, chosen_positions=None,
                   max_loops=100000):
    """SQ2 Dream ``diffusion_generate`` with explicit randomness (ties="lowest").

    model: callable ``(canvas list[B][L], attention_mask list[B][L]) -> token-aligned logits``
    (N6 already applied).  origin_uniforms / sampled_tokens / chosen_positions: None, a list
    indexed by step, or callable(step) returning the per-step inputs of ``dream_origin_step`` /
    ``dream_step``.  Returns dict 'canvas', 'steps' (per-step records), 'full_forwards'.
    Hooks are not modelled.
    """
    if alg not in ("origin", "maskgit_plus", "topk_margin", "entropy"):
        raise ValueError("alg must be origin, maskgit_plus, topk_margin or entropy")
    if tokens_per_step is not None and alg == "origin":
        raise ValueError("tokens_per_step is refused with alg='origin'")
    x, attn = dream_canvas(prompt, attention_mask, mask_id, max_length, max_new_tokens)
    records = []
    forwards = 0
    if tokens_per_step is not None:
        step = 0
        # READING: "until no mask is left" = until no row of the batch has a mask.
        while any(t == mask_id for row in x for t in row):
            if step >= max_loops:
                raise RuntimeError("no progress (the model keeps proposing the mask token?)")
            logits = model([list(r) for r in x], [list(a) for a in attn])
            forwards += 1
            res = dream_step(logits, x, alg=alg, k=tokens_per_step, mask_id=mask_id,
                             temperature=temperature, top_p=top_p, top_k=top_k, alg_temp=alg_temp,
                             sampled_tokens=_take(sampled_tokens, step),
                             chosen_positions=_take(chosen_positions, step))
            x = res["canvas"]
            records.append(res)
            step += 1
        return {"canvas": x, "steps": records, "full_forwards": forwards}
    for step in range(steps):
        logits = model([list(r) for r in x], [list(a) for a in attn])
        forwards += 1
        if alg == "origin":
            res = dream_origin_step(logits, x, step=step, steps=steps, eps=eps, mask_id=mask_id,
                                    uniforms=_take(origin_uniforms, step), temperature=temperature,
                                    top_p=top_p, top_k=top_k,
                                    sampled_tokens=_take(sampled_tokens, step))
        else:
            counts = [sum(1 for t in row if t == mask_id) for row in x]
            k = dream_transfer_count(counts, step, steps, eps)
            res = dream_step(logits, x, alg=alg, k=k, mask_id=mask_id, temperature=temperature,
                             top_p=top_p, top_k=top_k, alg_temp=alg_temp,
                             sampled_tokens=_take(sampled_tokens, step),
                             chosen_positions=_take(chosen_positions, step))
            res["batch_k"] = k
        x = res["canvas"]
        records.append(res)
    return {"canvas": x, "steps": records, "full_forwards": forwards}


# ----------------------------------------------------------------------------------------------
# Worked examples (replayable data: examples/sequential.json)
# ----------------------------------------------------------------------------------------------

def toy_model(canvas, attention_mask):
    """A deterministic toy mask predictor for the end-to-end examples (plain function).

    V = 4: tokens 0, 1, 2 and the mask id 3 (its logit is -30, finite so that CFG stays finite).
    For row b and position i, with f = the row's first attended position (N2), r = i - f (the
    RoPE position), n = number of attended non-mask tokens of the row and s = their sum:
    ``logits[b][i][v] = ((r + 1) * (v + 2) + 3 * n + s) % 7`` for v < 3 (integers: exact ties
    are frequent on purpose, they exercise SQ0.4).  Padded rows compute what they compute alone.
    """
    out = []
    for b in range(len(canvas)):
        att = attention_mask[b]
        f = next((j for j in range(len(att)) if att[j] == 1), 0)
        obs = [canvas[b][j] for j in range(len(canvas[b])) if att[j] == 1 and canvas[b][j] != 3]
        n, s = len(obs), sum(obs)
        out.append([[float(((i - f + 1) * (v + 2) + 3 * n + s) % 7) for v in range(3)] + [-30.0]
                    for i in range(len(canvas[b]))])
    return out


def worked_examples():
    """Worked examples of spec/sequential.md as replayable data (examples/sequential.json, read by ``data.load``;
    ``{"name": "toy_model"}`` there is ``toy_model``).

    Returns a list of dicts with keys
      'name', 'clause', 'note' (str);
      'function' (name of a function of this module), 'kwargs' (its keyword arguments);
      'expected': either the expected return value, or, when 'keys' is present, a dict mapping
      those keys of the returned dict to their expected values.
    Numbers: ints/Fractions compare exactly, floats within 1e-12 relative (``replay``).
    Examples named 'e2e_*' were computed by this oracle on ``toy_model`` and cross-checked by an
    independent brute force; all others were derived by hand.
    """
    return load(__file__, names={"toy_model": toy_model})


def _close(a, b):
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        a, b = float(a), float(b)
        if math.isinf(a) or math.isinf(b) or math.isnan(a) or math.isnan(b):
            return a == b or (math.isnan(a) and math.isnan(b))
        return abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))
    return a == b


def replay(example, function=None):
    """Run one worked example through ``function`` (default: this oracle's function of that
    name) and return ``(ok, actual, expected)``.  A production wrapper with the same signature
    can be passed as ``function``."""
    fn = function or globals()[example["function"]]
    got = fn(**example["kwargs"])
    if "keys" in example:
        got = {k: got[k] for k in example["keys"]}
    return _close(got, example["expected"]), got, example["expected"]
