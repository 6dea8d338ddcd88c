"""DiffusionGemma's renoising decoder written from scratch to SGLang's ``DllmAlgorithm`` contract for uniform-state
canvases (spec/engines.md EN8): built from a ``DllmConfig`` (SGLang's nested ``algorithm_config`` sections), it
runs its own loop, ``run(model_runner, forward_batch, states)``: a fresh canvas per row from the row's generator,
then forward, ``step``, ``prepare_inputs`` until every row is done or ``max_denoising_steps`` steps. A step
(spec/diffusiongemma.md DG3-DG4): the logits at the schedule's temperature, the positions accepted by the
cumulative entropy bound take a sample, the others fresh noise; the row stops with its argmax canvas when that
canvas has been stable and the mean entropy is low, or at its last step; the step's probabilities go back to the
model as soft embeddings (self-conditioning). Each row draws from its own generator (``seed``, else the request
id's blake2b), in the order start, then per step the sample (an exponential race) and the noise. No sglang import.

    veridec check --engine sglang:examples/sglang_renoise.py:RenoiseSampler --against diffusiongemma
"""

import hashlib

import torch


class RenoiseSampler:
    def __init__(self, config):
        knobs = config.algorithm_config or {}
        self.size, self.steps = config.block_size, knobs.get("max_denoising_steps", 48)
        self.bound = (knobs.get("sampler_config") or {}).get("entropy_bound", 0.1)
        schedule, stop = knobs.get("temperature_schedule") or {}, knobs.get("stopping_config") or {}
        self.t_min, self.t_max = schedule.get("t_min", 0.4), schedule.get("t_max", 0.8)
        self.stable_for = stop.get("stability_threshold", 1)
        self.confident_below = stop.get("confidence_threshold", 0.005)
        self.seed = knobs.get("seed")

    def run(self, model_runner, forward_batch, states=None):
        self.vocab = model_runner.model_config.hf_config.text_config.vocab_size
        self.embedding = model_runner.model.get_input_embeddings()
        states = self.init_step_state(forward_batch)
        self.prepare_inputs(model_runner, forward_batch, states)
        out = model_runner.forward(forward_batch, pp_proxy_tensors=None)
        for _ in range(self.steps):
            if all(self.step(forward_batch, out.logits_output.full_logits, states)):
                break
            self.prepare_inputs(model_runner, forward_batch, states)
            out = model_runner.forward(forward_batch, pp_proxy_tensors=None)
        return out.logits_output, list(forward_batch.input_ids.view(-1, self.size)), None, None, False

    def generator(self, rid, device):
        seed = self.seed if self.seed is not None else \
            int.from_bytes(hashlib.blake2b(rid.encode(), digest_size=8).digest(), "little")
        return torch.Generator(device=device).manual_seed(seed)

    def init_step_state(self, forward_batch):
        device, states = forward_batch.input_ids.device, []
        for rid in forward_batch.rids:
            generator = self.generator(rid, device)
            canvas = torch.randint(self.vocab, (self.size,), generator=generator, device=device)  # [L]
            states.append({"left": self.steps, "canvas": canvas, "generator": generator, "seen": [],
                           "signal": None, "done": False})
        return states

    def prepare_inputs(self, model_runner, forward_batch, states):
        forward_batch.input_ids.view(len(states), self.size).copy_(torch.stack([s["canvas"] for s in states]))
        signals = [s["signal"] for s in states]
        signal = None
        if any(x is not None for x in signals):
            zero = torch.zeros(self.size, self.embedding.weight.shape[-1], dtype=self.embedding.weight.dtype,
                               device=forward_batch.input_ids.device)  # [L, H]
            signal = torch.cat([zero if x is None else x for x in signals])  # [B*L, H]
        forward_batch.input_embeds = model_runner.model.prepare_dllm_input_embeds(forward_batch.input_ids, signal)

    def step(self, forward_batch, full_logits, states):
        logits = full_logits.view(len(states), self.size, -1)  # [B, L, V]
        for row, state in enumerate(states):
            if not state["done"]:
                self.advance(state, logits[row])
        forward_batch.input_ids.view(len(states), self.size).copy_(torch.stack([s["canvas"] for s in states]))
        return [s["done"] for s in states]

    def temperature(self, left):
        return self.t_min + (self.t_max - self.t_min) * (torch.tensor(left, dtype=torch.int32) / self.steps)

    def advance(self, state, logits):
        processed = logits / self.temperature(state["left"])  # [L, V]
        probs = torch.softmax(processed, dim=-1, dtype=torch.float32)  # [L, V]
        race = torch.empty_like(probs).exponential_(1.0, generator=state["generator"])  # [L, V]
        sample = (probs / race).argmax(dim=-1)  # [L]
        noise = torch.randint(self.vocab, (self.size,), generator=state["generator"], device=logits.device)  # [L]
        entropy = torch.distributions.Categorical(logits=processed).entropy()  # [L]
        ranked, order = torch.sort(entropy)
        accepted = torch.zeros_like(ranked, dtype=torch.bool).scatter(0, order, ranked.cumsum(0) - ranked <= self.bound)
        argmax = processed.argmax(dim=-1)  # [L]
        state["done"] = self.stops(state, argmax, entropy)
        state["canvas"] = argmax if state["done"] else torch.where(accepted, sample, noise)
        state["signal"] = None if state["done"] else self.soft_embeddings(probs)

    def stops(self, state, argmax, entropy):
        seen = state["seen"]
        stable = self.stable_for == 0 or (len(seen) == self.stable_for and all(torch.equal(a, argmax) for a in seen))
        state["seen"] = (seen + [argmax])[-self.stable_for:] if self.stable_for else []
        state["left"] -= 1
        return bool(stable and entropy.mean() < self.confident_below) or state["left"] == 0

    def soft_embeddings(self, probs):
        weight = self.embedding.weight  # [V, H]
        return probs.to(weight.dtype) @ weight * self.embedding.embed_scale.to(weight.dtype)  # [L, H]
