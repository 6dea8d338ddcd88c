"""Decoding speed: one definition for every report that states one (issue 26).

Throughput is the generated tokens up to and including each row's first EOS (the prompt excluded, masks left
undecoded not counted; a row without EOS counts its whole generation), summed over the batch, per wall-clock
second of the decode. What comes after the first EOS is padding a user never reads, so a decoder that fills it
fast is not faster. A speed is reported with what it depends on: the model calls, the device's name, the dtype
and the batch size (``Throughput.to_dict``).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass

import torch


def generated_tokens(canvas: torch.Tensor, prompt_length: int, eos_id: int | None,
                     mask_id: int | None = None) -> int:
    """canvas [B, P + G] -> the generated tokens up to and including each row's first EOS, summed over rows
    (positions still holding ``mask_id`` are not counted)."""
    generated = canvas[:, prompt_length:]  # [B, G]
    batch, length = generated.shape
    columns = torch.arange(length, device=generated.device)  # [G]
    if eos_id is None:
        kept = torch.ones_like(generated, dtype=torch.bool)
    else:
        is_eos = generated == eos_id
        first = torch.where(is_eos.any(dim=1), is_eos.int().argmax(dim=1), length)  # [B] first EOS, or G
        kept = columns[None] <= first[:, None]  # [B, G] up to and including it
    if mask_id is not None:
        kept &= generated != mask_id
    return int(kept.sum())


def device_name(device: torch.device | str) -> str:
    """The device as a report names it: the GPU's name on CUDA, else the type and the processor."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{device.type} ({platform.processor() or platform.machine()})"


@dataclass(frozen=True)
class Throughput:
    tokens: int  # generated tokens up to and including each row's first EOS, over the batch
    seconds: float  # wall clock of the decode
    model_calls: int
    device: str
    dtype: str
    batch: int

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("inf")

    def to_dict(self) -> dict:
        return {"tokens_per_second": round(self.tokens_per_second, 3), "tokens": self.tokens,
                "seconds": round(self.seconds, 4), "model_calls": self.model_calls, "device": self.device,
                "dtype": self.dtype, "batch": self.batch}

    def summary(self) -> str:
        """One line: '12.3 tokens/s (40 tokens up to the first EOS in 3.25 s, 34 model calls, cpu (x86_64),
        float32, batch 1)'."""
        return (f"{self.tokens_per_second:.1f} tokens/s ({self.tokens} tokens up to the first EOS in "
                f"{self.seconds:.2f} s, "
                f"{self.model_calls} model calls, {self.device}, {self.dtype}, batch {self.batch})")


def throughput(canvas: torch.Tensor, prompt_length: int, seconds: float, *, model_calls: int,
               eos_id: int | None, dtype: torch.dtype | str, mask_id: int | None = None,
               device: torch.device | str | None = None) -> Throughput:
    """The speed of a decode that produced ``canvas`` [B, P + G] in ``seconds`` with ``model_calls`` calls
    (``device`` defaults to the canvas's)."""
    return Throughput(generated_tokens(canvas, prompt_length, eos_id, mask_id), seconds, model_calls,
                      device_name(canvas.device if device is None else device),
                      str(dtype).removeprefix("torch."), canvas.shape[0])
