"""Tokenizers for the engine and the planner, built offline from a GGUF file or an HF folder.

`HFTokenizer` wraps a `tokenizers.Tokenizer` and adds what fimgate needs beyond encode/decode:
- special tokens in *user text* are never parsed as control tokens (`encode_special_tokens`),
  so a file containing "<file_sep>" cannot forge a template boundary;
- `pretoken_starts` exposes the pre-tokenizer's split points, which the planner uses to find
  where appending text can no longer change earlier tokens (fragment tokenization);
- `token_bytes` gives every token's exact bytes, for streaming and for healing constraints.

Imports no torch.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cached_property

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers


# GPT-2's byte <-> printable-unicode table, used by every byte-level BPE vocabulary.
def _bytes_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


_BYTE_DECODER = {c: b for b, c in _bytes_to_unicode().items()}

# Pre-tokenizer regexes by GGUF `tokenizer.ggml.pre` name (as llama.cpp names them).
_QWEN2_REGEX = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"


def _gguf_pre_tokenizer(pre: str):
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre in ("smollm", "starcoder", "refact"):
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    if pre in ("qwen2", "deepseek-coder"):
        split = pre_tokenizers.Split(Regex(_QWEN2_REGEX), behavior="isolated")
        return pre_tokenizers.Sequence([split, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    if pre in ("default", "gpt-2", "gpt2"):
        return byte_level
    raise ValueError(f"unsupported GGUF pre-tokenizer {pre!r}: load the model from a Hugging Face folder instead")


class HFTokenizer:
    """A `tokenizers.Tokenizer` plus the few extras fimgate's planner and sampler need."""

    def __init__(self, tok: Tokenizer, *, bos_id: int | None, eos_id: int | None, add_bos: bool = False) -> None:
        self._tok = tok
        self._tok.encode_special_tokens = True
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.add_bos = add_bos and bos_id is not None  # prompts start with BOS (Gemma, Llama 2)
        self._special = {t.content: i for i, t in tok.get_added_tokens_decoder().items()}

    # -- loading -------------------------------------------------------------------------
    @classmethod
    def from_gguf(cls, fields: dict, path: str) -> "HFTokenizer":
        """Build the tokenizer from a GGUF file's metadata (gguf_file.GGUFFile.fields; byte-level BPE
        vocabularies here, SentencePiece ones converted once)."""

        def field(name, default=None):
            return fields.get(name, default)

        kind = field("tokenizer.ggml.model")
        add_bos = bool(field("tokenizer.ggml.add_bos_token", False))
        if kind == "llama":
            return cls._from_gguf_sentencepiece(path, fields, add_bos)
        if kind != "gpt2":
            raise ValueError(f"GGUF tokenizer model {kind!r} is not supported; use the model's Hugging Face folder")
        tokens = field("tokenizer.ggml.tokens")
        types = field("tokenizer.ggml.token_type")
        merges = [tuple(m.split(" ", 1)) for m in field("tokenizer.ggml.merges")]
        vocab = {t: i for i, t in enumerate(tokens)}
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
        tok.pre_tokenizer = _gguf_pre_tokenizer(field("tokenizer.ggml.pre", "default"))
        tok.decoder = decoders.ByteLevel()
        from tokenizers import AddedToken

        control = [AddedToken(tokens[i], special=True, normalized=False) for i, ty in enumerate(types) if ty in (3, 4)]
        tok.add_special_tokens(control)
        return cls(tok, bos_id=field("tokenizer.ggml.bos_token_id"), eos_id=field("tokenizer.ggml.eos_token_id"), add_bos=add_bos)

    @classmethod
    def _from_gguf_sentencepiece(cls, path: str, fields: dict, add_bos: bool) -> "HFTokenizer":
        """SentencePiece vocabularies (Gemma): converted once by transformers' GGUF converter,
        then cached as tokenizer.json, since the conversion of a 262k vocabulary takes ~15 s."""
        st = os.stat(path)
        key = hashlib.sha1(f"{os.path.abspath(path)}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
        cache_dir = os.environ.get("FIMGATE_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "fimgate"))
        cached = os.path.join(cache_dir, f"tokenizer-{key}.json")
        meta = {k: fields[k] for k in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id") if k in fields}
        if not os.path.exists(cached):
            try:
                from transformers import AutoTokenizer
            except ImportError as e:
                raise ValueError("a SentencePiece GGUF tokenizer needs `transformers` to convert it once") from e
            hf = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(path)), gguf_file=os.path.basename(path))
            os.makedirs(cache_dir, exist_ok=True)
            hf.backend_tokenizer.save(cached + ".tmp")
            os.replace(cached + ".tmp", cached)
        return cls(
            Tokenizer.from_file(cached),
            bos_id=meta.get("tokenizer.ggml.bos_token_id"),
            eos_id=meta.get("tokenizer.ggml.eos_token_id"),
            add_bos=add_bos,
        )

    @classmethod
    def from_folder(cls, path: str) -> "HFTokenizer":
        tok = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
        bos = eos = None
        add_bos = False
        for name in ("tokenizer_config.json", "config.json"):
            p = os.path.join(path, name)
            if not os.path.exists(p):
                continue
            cfg = json.load(open(p, encoding="utf-8"))
            for key, val in (("bos_token", None), ("eos_token", None)):
                v = cfg.get(key)
                if isinstance(v, dict):
                    v = v.get("content")
                if isinstance(v, str) and tok.token_to_id(v) is not None:
                    if key == "bos_token" and bos is None:
                        bos = tok.token_to_id(v)
                    if key == "eos_token" and eos is None:
                        eos = tok.token_to_id(v)
            if eos is None and isinstance(cfg.get("eos_token_id"), int):
                eos = cfg["eos_token_id"]
            if bos is None and isinstance(cfg.get("bos_token_id"), int):
                bos = cfg["bos_token_id"]
            add_bos = add_bos or bool(cfg.get("add_bos_token", False))
        return cls(tok, bos_id=bos, eos_id=eos, add_bos=add_bos)

    # -- the Tokenizer protocol ------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        """Token ids of plain text; control tokens in the text are spelled out, never parsed."""
        return self._tok.encode(text, add_special_tokens=False).ids

    def encode_with_starts(self, text: str) -> tuple[list[int], list[int]]:
        """Token ids and the character offset where each token starts."""
        enc = self._tok.encode(text, add_special_tokens=False)
        return enc.ids, [s for s, _ in enc.offsets]

    def decode(self, ids: list[int]) -> str:
        return b"".join(self.token_bytes[i] for i in ids).decode("utf-8", errors="replace")

    def token_id(self, token: str) -> int | None:
        """Id of a special/control token by its text, or None when the vocabulary lacks it."""
        if token in self._special:
            return self._special[token]
        return None

    def id_to_token(self, i: int) -> str | None:
        return self._tok.id_to_token(i)

    def save(self, path: str) -> None:
        """Write tokenizer.json (what HF folders, and so vLLM, read)."""
        self._tok.save(path)

    def pretoken_starts(self, text: str) -> list[int]:
        """Character offsets where the pre-tokenizer starts a new piece. BPE never merges
        across these, so text appended after the end cannot change tokens before the last one."""
        pre = self._tok.pre_tokenizer
        if pre is None:
            # No pre-tokenizer (SentencePiece-style): fall back to token starts.
            return sorted({s for s, _ in self._tok.encode(text, add_special_tokens=False).offsets})
        normalizer = self._tok.normalizer
        if normalizer is not None and normalizer.normalize_str(text) != text:
            return sorted({s for s, _ in self._tok.encode(text, add_special_tokens=False).offsets})
        return [start for _, (start, _) in pre.pre_tokenize_str(text)]

    # -- bytes -----------------------------------------------------------------------------
    @cached_property
    def token_bytes(self) -> list[bytes]:
        """The exact bytes each token id stands for (control tokens: their text)."""
        size = self.vocab_size
        out: list[bytes] = [b""] * size
        byte_level = isinstance(self._tok.decoder, decoders.ByteLevel) or "ByteLevel" in str(self._tok.decoder)
        for piece, i in self._tok.get_vocab(with_added_tokens=True).items():
            if i >= size:
                continue
            if piece in self._special:
                out[i] = piece.encode("utf-8")
            elif byte_level:
                try:
                    out[i] = bytes(_BYTE_DECODER[c] for c in piece)
                except KeyError:
                    out[i] = piece.encode("utf-8")
            elif piece.startswith("<0x") and piece.endswith(">") and len(piece) == 6:
                out[i] = bytes([int(piece[3:5], 16)])
            else:
                out[i] = piece.replace("\u2581", " ").encode("utf-8")
        return out
