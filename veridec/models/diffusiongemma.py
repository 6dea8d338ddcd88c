"""DiffusionGemma behind veridec's model interface (spec/diffusiongemma.md DG1): transformers' own modelling
(``DiffusionGemmaForBlockDiffusion``) wrapped, so the decoders in reference/ and optimized/ are what is verified.

A uniform-state model has no mask token: every canvas position always holds a token. Its interface differs from a
mask predictor's (veridec.models.interface): an encoder writes the prefix's K/V into a cache (``encode``), a
bidirectional decoder reads it read-only and scores a canvas given the previous step's logits (``denoise``), or
one call does both over the whole prefix (``full_forward``, the reference's). A mask sampler handed this model is
refused where it reads ``model.special`` (DG1.4).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

TRANSFORMERS_NEEDED = "5.24"  # the first transformers that ships models/diffusion_gemma (golden data: 5.25.0)
TINY_TEXT = dict(vocab_size=32, hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                 num_key_value_heads=1, head_dim=16, global_head_dim=16, num_experts=4, top_k_experts=2,
                 moe_intermediate_size=32, enable_moe_block=True, sliding_window=8, max_position_embeddings=256,
                 layer_types=["sliding_attention", "full_attention"], pad_token_id=0, eos_token_id=1, bos_token_id=2)
TINY_VISION = dict(model_type="gemma4_vision", hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                   num_attention_heads=1, num_key_value_heads=1, head_dim=8, patch_size=2, position_embedding_size=4,
                   pooling_kernel_size=1)  # built by the encoder whatever the task (text only here)


class DiffusionGemmaUnavailable(ImportError):
    """The installed transformers has no ``transformers.models.diffusion_gemma`` (DG1.1)."""


class UniformStateModelError(ValueError):
    """A uniform-state model handed to a sampler that needs a mask token (DG1.4)."""


def diffusion_gemma_classes():
    """transformers' (config class, model class), or DiffusionGemmaUnavailable naming the version needed."""
    import transformers

    try:
        from transformers.models.diffusion_gemma import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion
    except ImportError as err:
        raise DiffusionGemmaUnavailable(
            f"DiffusionGemma needs transformers >= {TRANSFORMERS_NEEDED} (it ships transformers.models."
            f"diffusion_gemma); the installed transformers is {transformers.__version__}: pip install "
            f"'transformers>={TRANSFORMERS_NEEDED}'") from err
    return DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion


class DiffusionGemmaPredictor:
    """``DiffusionGemmaForBlockDiffusion`` as a uniform-state model (DG1): ``encode`` / ``denoise`` for a cached
    decoder, ``full_forward`` for the reference; logits come back float32 [B, L, V] as the official forward returns
    them. ``generation``: the checkpoint's generation_config.json fields (unset ones are absent)."""

    uniform_state = True

    def __init__(self, hf_model, generation: dict | None = None):
        self.hf = hf_model.eval()
        self.config = hf_model.config
        self.vocab_size = hf_model.config.text_config.vocab_size
        self.canvas_length = hf_model.config.canvas_length
        self.max_length = hf_model.config.text_config.max_position_embeddings
        self.generation = dict(generation or {})

    @property
    def special(self):
        raise UniformStateModelError(
            f"{type(self).__name__} is a uniform-state model (DiffusionGemma): it has no mask token, so a mask "
            "sampler cannot decode it; use veridec.reference.diffusiongemma.generate or "
            "veridec.optimized.diffusiongemma.generate (spec/diffusiongemma.md DG1.4)")

    @property
    def device(self) -> torch.device:
        return self.hf.device

    @property
    def dtype(self) -> torch.dtype:
        return self.hf.dtype

    @property
    def embedding_dtype(self) -> torch.dtype:
        return self.hf.model.decoder.embed_tokens.weight.dtype

    def to(self, *args, **kwargs) -> "DiffusionGemmaPredictor":
        self.hf.to(*args, **kwargs)
        return self

    def new_cache(self, static_length: int | None = None, batch_size: int = 1):
        """An empty encoder cache: dynamic, or static with room for ``static_length`` positions."""
        from transformers import DynamicCache, StaticCache

        text = self.config.get_text_config(decoder=True)
        if static_length is None:
            return DynamicCache(config=text)
        return StaticCache(config=text, max_cache_len=static_length)

    def encode(self, tokens: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor, cache):
        """The encoder over ``tokens`` [B, n] at ``positions`` [1, n], appended to ``cache``; ``attention_mask``
        [B, cached + n] bool covers everything encoded so far. Returns the cache (DG2.1)."""
        dummy = torch.empty((tokens.shape[0], tokens.shape[1], 0), dtype=self.dtype, device=tokens.device)
        masks = self.hf.model.encoder.create_masks_for_generate(
            config=self.config, inputs_embeds=dummy, attention_mask=attention_mask, cache=cache,
            position_ids=positions, mm_token_type_ids=None)
        out = self.hf.model.encoder(input_ids=tokens.contiguous(), attention_mask=masks, cache=cache,
                                    position_ids=positions)
        return out.cache

    def decoder_masks(self, canvas: torch.Tensor, cache, decoder_attention_mask: torch.Tensor) -> dict:
        """The decoder's attention masks per layer type, for ``canvas`` [B, L] over the cached prefix (DG2.2)."""
        return self.hf.model.decoder.create_diffusion_decoder_attention_mask(
            config=self.config, inputs_embeds=canvas.unsqueeze(-1), cache=cache,
            decoder_attention_mask=decoder_attention_mask)

    def denoise(self, canvas: torch.Tensor, cache, self_conditioning: torch.Tensor | None, masks,
                positions: torch.Tensor) -> torch.Tensor:
        """The decoder on ``canvas`` [B, L] at ``positions`` [1, L] reading ``cache``; ``self_conditioning`` [B, L,
        V] the previous step's processed logits (None at a canvas's first step). -> logits float32 [B, L, V]."""
        return self.hf(decoder_input_ids=canvas, self_conditioning_logits=self_conditioning,
                       decoder_attention_mask=masks, cache=cache, decoder_position_ids=positions).logits

    def full_forward(self, prefix: torch.Tensor, attention_mask: torch.Tensor, canvas: torch.Tensor,
                     self_conditioning: torch.Tensor | None, chunk_ends: list[int] | None = None,
                     static_length: int | None = None) -> torch.Tensor:
        """One call over everything: the encoder on the whole ``prefix`` [B, T] (``attention_mask`` [B, T] bool)
        into a fresh cache, then the decoder on ``canvas`` [B, L] after it. ``chunk_ends``: encode the prefix in
        these chunks (the official loop's: the prompt, then each canvas; the causal encoder's result is the same
        up to rounding, and the same bits in these chunks: DG2.1); one chunk when None. ``static_length``: a
        StaticCache of that many positions instead of a DynamicCache (DG2.4). -> logits float32 [B, L, V]."""
        length = prefix.shape[1]
        cache, start = self.new_cache(static_length), 0
        for end in chunk_ends or [length]:
            cache = self.encode(prefix[:, start:end], attention_mask[:, :end], _positions(start, end, prefix.device),
                                cache)
            start = end
        full_mask = torch.nn.functional.pad(attention_mask, (0, canvas.shape[1]), value=True)  # [B, T + L]
        masks = self.decoder_masks(canvas, cache, full_mask)
        return self.denoise(canvas, cache, self_conditioning, masks,
                            _positions(length, length + canvas.shape[1], prefix.device))


def _positions(start: int, stop: int, device) -> torch.Tensor:
    """Absolute positions [1, n] as the official loop builds them (int32, shared by every row: DG2.3)."""
    return torch.arange(start, stop, dtype=torch.int32, device=device).unsqueeze(0)


def load_diffusiongemma(folder: str | Path, dtype: torch.dtype | None = None,
                        device: str | torch.device = "cpu") -> DiffusionGemmaPredictor:
    """A local folder with config.json (model_type diffusion_gemma, canvas_length set), *.safetensors and an
    optional generation_config.json -> DiffusionGemmaPredictor (SDPA attention, eager experts: any dtype, DG1.2)."""
    folder = Path(folder)
    config = _read_json(folder / "config.json", "config.json")
    if config.get("model_type") != "diffusion_gemma":
        raise ValueError(f"{folder}/config.json: model_type must be 'diffusion_gemma' for a DiffusionGemma "
                         f"checkpoint, got {config.get('model_type')!r}")
    if not isinstance(config.get("canvas_length"), int) or config["canvas_length"] < 1:
        raise ValueError(f"{folder}/config.json: canvas_length must be an integer >= 1 (the decoder's canvas), got "
                         f"{config.get('canvas_length')!r}")
    if not list(folder.glob("*.safetensors")):
        raise ValueError(f"{folder}: no *.safetensors weights (veridec loads no pickles)")
    _, model_class = diffusion_gemma_classes()
    hf = model_class.from_pretrained(folder, dtype=dtype or torch.float32, attn_implementation="sdpa",
                                     experts_implementation="eager", use_safetensors=True)
    generation_path = folder / "generation_config.json"
    generation = _read_json(generation_path, "generation_config.json") if generation_path.exists() else {}
    return DiffusionGemmaPredictor(hf.to(device), generation)


SHIPPED_FOLDER = Path(__file__).resolve().parent.parent / "assets" / "diffusiongemma"


def load_shipped_diffusiongemma(dtype: torch.dtype | None = None,
                                device: str | torch.device = "cpu") -> DiffusionGemmaPredictor:
    """The shipped tiny DiffusionGemma (veridec/assets/diffusiongemma, canvas 16, trained: DG1.2)."""
    return load_diffusiongemma(SHIPPED_FOLDER, dtype, device)


def _read_json(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as err:
        raise ValueError(f"{path.parent}: no {what}") from err
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from err
    if not isinstance(data, dict):
        raise ValueError(f"{path}: must hold a JSON object, got {type(data).__name__}")
    return data


def random_diffusiongemma(seed: int = 0, canvas_length: int = 16, dtype: torch.dtype = torch.float32,
                          initializer_range: float = 0.5, generation: dict | None = None,
                          **text) -> DiffusionGemmaPredictor:
    """A random tiny DiffusionGemma (2 layers, hidden 64, 4 experts, vocabulary 32 unless ``text`` says otherwise);
    ``initializer_range`` spreads its logits so that acceptances and stops decide something."""
    config_class, model_class = diffusion_gemma_classes()
    text_config = {**TINY_TEXT, "initializer_range": initializer_range, **text}
    config = config_class(text_config=text_config, vision_config=TINY_VISION, canvas_length=canvas_length,
                          initializer_range=initializer_range)
    config._experts_implementation = "eager"
    config._attn_implementation = "sdpa"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        hf = model_class(config)
    return DiffusionGemmaPredictor(hf.to(dtype), generation)


def write_tiny_diffusiongemma(folder: str | Path, seed: int = 0, canvas_length: int = 16,
                              dtype: torch.dtype = torch.float32, generation: dict | None = None,
                              **text) -> Path:
    """Write ``random_diffusiongemma(...)`` as a local checkpoint folder (config.json, model.safetensors,
    generation_config.json holding ``generation``); returns the folder."""
    folder = Path(folder)
    model = random_diffusiongemma(seed, canvas_length, dtype, generation=generation, **text)
    model.hf.save_pretrained(folder, safe_serialization=True)
    gen = {key: value for key, value in (generation or {}).items()}
    (folder / "generation_config.json").write_text(json.dumps(gen, indent=1) + "\n")
    return folder
