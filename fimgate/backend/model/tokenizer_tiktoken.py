"""A tiktoken vocabulary behind the same interface as `HFTokenizer` (Qwen's ranks, for one).

tiktoken files carry only the byte-level BPE ranks and a pre-tokenizer regex; control tokens
are appended by the model family. `qwen25` rebuilds Qwen2.5(-Coder)'s special tokens, FIM
sentinels included (<|fim_prefix|> 151659, <|fim_middle|> 151660, <|fim_suffix|> 151661).
Imports no torch.
"""

from __future__ import annotations

import base64
from functools import cached_property

QWEN_PATTERN = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN25_SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)


class TiktokenTokenizer:
    def __init__(
        self,
        ranks_path: str,
        pattern: str,
        special_tokens: dict[str, int],
        *,
        bos_id: int | None = None,
        eos_id: int | None = None,
    ) -> None:
        import regex
        import tiktoken

        with open(ranks_path, "rb") as f:
            ranks = {base64.b64decode(tok): int(rank) for tok, rank in (line.split() for line in f if line.strip())}
        self._enc = tiktoken.Encoding("fimgate", pat_str=pattern, mergeable_ranks=ranks, special_tokens=special_tokens)
        self._pattern = regex.compile(pattern)
        self._special = dict(special_tokens)
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.add_bos = False

    @classmethod
    def qwen25(cls, ranks_path: str) -> "TiktokenTokenizer":
        first = 151643
        specials = {t: first + i for i, t in enumerate(QWEN25_SPECIAL_TOKENS)}
        return cls(ranks_path, QWEN_PATTERN, specials, eos_id=specials["<|endoftext|>"])

    @property
    def vocab_size(self) -> int:
        return self._enc.n_vocab

    def encode(self, text: str) -> list[int]:
        return self._enc.encode_ordinary(text)  # control tokens in text stay text

    def encode_with_starts(self, text: str) -> tuple[list[int], list[int]]:
        ids = self._enc.encode_ordinary(text)
        char_of_byte = []
        for i, ch in enumerate(text):
            char_of_byte.extend([i] * len(ch.encode("utf-8")))
        starts, pos = [], 0
        for t in ids:
            starts.append(char_of_byte[pos] if pos < len(char_of_byte) else len(text))
            pos += len(self.token_bytes[t])
        return ids, starts

    def decode(self, ids: list[int]) -> str:
        return b"".join(self.token_bytes[i] for i in ids).decode("utf-8", errors="replace")

    def token_id(self, token: str) -> int | None:
        return self._special.get(token)

    def pretoken_starts(self, text: str) -> list[int]:
        return [m.start() for m in self._pattern.finditer(text)]

    @cached_property
    def token_bytes(self) -> list[bytes]:
        out = [b""] * self._enc.n_vocab
        for i in range(self._enc.n_vocab):
            try:
                out[i] = self._enc.decode_single_token_bytes(i)
            except KeyError:
                pass
        for text, i in self._special.items():
            out[i] = text.encode("utf-8")
        return out
