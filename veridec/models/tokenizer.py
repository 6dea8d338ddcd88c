"""Character-level tokenizers made locally (no hub), saved as standard transformers tokenizer files."""

from __future__ import annotations

import string

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from .layouts import LAYOUTS

# Printable ASCII plus newline and tab: 97 characters.
DEFAULT_ALPHABET = "".join(c for c in string.printable if c not in "\x0b\x0c\r")

# Special-token strings of each layout's official tokenizer: (mask, eos = pad, end of turn).
LAYOUT_SPECIALS = {name: (layout.mask_token, "<|endoftext|>", layout.eot_token) for name, layout in LAYOUTS.items()}


def char_tokenizer(layout: str, alphabet: str = DEFAULT_ALPHABET) -> PreTrainedTokenizerFast:
    """One token per character of ``alphabet`` (ids 0..len-1), then mask, EOS (also pad) and end-of-turn."""
    if layout not in LAYOUT_SPECIALS:
        raise ValueError(f"layout must be one of {sorted(LAYOUT_SPECIALS)}, got {layout!r}")
    if len(set(alphabet)) != len(alphabet):
        raise ValueError("alphabet: characters must be distinct")
    mask, eos, eot = LAYOUT_SPECIALS[layout]
    vocab = {c: i for i, c in enumerate(alphabet)}
    for token in (mask, eos, eot):
        vocab[token] = len(vocab)
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=eos))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), "isolated")  # every character alone
    backend.decoder = decoders.Fuse()  # join characters without spaces
    return PreTrainedTokenizerFast(tokenizer_object=backend, mask_token=mask, eos_token=eos, pad_token=eos,
                                   additional_special_tokens=[eot], padding_side="left")
