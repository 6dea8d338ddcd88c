"""Draft trees for speculative decoding (spec/speculative.md SPD1-SPD2): which future states to verify.

A tree WxDy over a ranking r_1, r_2, ... of the still-masked block positions (by the current logits'
confidence, ties to the lowest position) and their top tokens: W alternatives at depth 1 (position r_1 with
its top-1, top-2, ..., top-W token), each followed by a chain that adds r_2, r_3, ... with top-1 tokens;
alternative i reaches depth D - i. Node counts: W1D1 1, W2D2 3, W3D3 6 (seed 001 Table 4); W1Dk is the
lossless chain's nested drafts (the k most confident positions filled one by one).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..checks import check_range


ALTERNATIVES = ("token", "position")


@dataclass(frozen=True)
class DraftTree:
    width: int = 1
    depth: int = 4
    alternatives: str = "position"

    def __post_init__(self):
        check_range("width", self.width, low=1, integer=True)
        check_range("depth", self.depth, low=1, integer=True)
        if self.alternatives not in ALTERNATIVES:
            raise ValueError(f"alternatives must be one of {list(ALTERNATIVES)}, got {self.alternatives!r}")
        if self.width > self.depth:
            raise ValueError(f"width ({self.width}) must be <= depth ({self.depth}): alternative i of a WxD tree "
                             "reaches depth D - i")

    @property
    def size(self) -> int:
        """Number of draft nodes: sum over alternatives i < W of (D - i)."""
        return sum(self.depth - i for i in range(self.width))

    def check_block(self, block_length: int) -> None:
        """A leaf fills ``depth`` positions beyond the state the rule's own step reaches (>= 1 commit)."""
        if self.depth > block_length - 1:
            raise ValueError(f"depth ({self.depth}) is a draft budget beyond the block: it must be <= "
                             f"block_length - 1 = {block_length - 1}")

    def nodes(self, positions: list[int], top_tokens: list[list[int]]) -> list[list[tuple[int, int]]]:
        """The draft states as lists of added (position, token), given the ranked masked positions and each
        one's tokens by decreasing probability. Truncated where positions or token alternatives run out."""
        out = []
        for alternative in range(self.width):
            if self.alternatives == "token":
                if not positions or alternative >= len(top_tokens[0]):
                    break
                added, rest = [(positions[0], top_tokens[0][alternative])], list(range(1, len(positions)))
            else:
                if alternative >= len(positions):
                    break
                added = [(positions[alternative], top_tokens[alternative][0])]
                rest = [i for i in range(len(positions)) if i != alternative]
            out.append(list(added))
            for i in rest[:self.depth - alternative - 1]:
                added.append((positions[i], top_tokens[i][0]))
                out.append(list(added))
        return out
