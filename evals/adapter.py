"""`lm_eval` model over scalelab checkpoints: `lm_eval --model scalelab --model_args path=RUN_OR_CKPT`.

Subclasses lm-eval's `TemplateLM`, so context/continuation tokenisation at the boundary (trailing
spaces moved to the continuation, whole string encoded then split) and empty contexts
(conditioned on EOT, our BOS) are exactly the reference client's; the scoring itself is in
`evals.requests`. Importing this module registers the model name with lm-eval.
"""

from __future__ import annotations

import json
import os
import warnings
from types import SimpleNamespace

import lm_eval.models  # noqa: F401 - registers lm-eval's own models first (its lazy registry
import torch  # is only filled when empty, so registering ours first would hide "hf")
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from tqdm import tqdm

from evals import requests as R


def _bool(v) -> bool:
    return v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes")


@register_model("scalelab")
class ScalelabLM(TemplateLM):
    """Model args: path (run dir or checkpoints/step_N), device, dtype, batch_size, max_length,
    max_batch_tokens, rolling_context (tokens of context per rolling window, 1 = lm-eval's
    default), seed (sampling), threads (torch CPU threads)."""

    def __init__(
        self,
        path: str | None = None,
        device: str | None = None,
        dtype: str = "float32",
        batch_size: int | str = 32,
        max_length: int | None = None,
        max_batch_tokens: int | None = 16384,
        rolling_context: int = 1,
        seed: int = 1234,
        max_gen_toks: int = 256,
        threads: int | None = None,
        loaded=None,
        **_ignored,
    ):
        super().__init__()
        from models.moe.routers import set_causal_routing  # deferred: imports torch
        from rundir.weights import load_run  # deferred: imports torch

        if threads:  # CPU: on a shared machine 1 thread is often many times faster than oversubscribed ones
            torch.set_num_threads(int(threads))
        if device and str(device).startswith("cuda") and not torch.cuda.is_available():
            warnings.warn(f"device={device} requested but CUDA is not available; using cpu", stacklevel=2)
            device = "cpu"
        self._device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if loaded is None:
            if path is None:
                raise ValueError("scalelab model needs path=<run dir or checkpoints/step_N>")
            loaded = load_run(path, device=self._device, dtype=getattr(torch, str(dtype)))
        self.loaded = loaded
        self.model = loaded.model.to(self._device).eval()
        # Scoring a continuation given its context, and generating, must be causal: expert_choice
        # routing would see later tokens and the other requests of the batch. Route token-choice.
        set_causal_routing(self.model)
        self.tokenizer = loaded.tokenizer
        self._eot = loaded.eot_id
        self._max_length = int(max_length) if max_length else loaded.model_config.seq_len
        bs = str(batch_size)
        self.batch_size = 32 if bs.startswith("auto") else int(bs)
        self.max_batch_tokens = int(max_batch_tokens) if max_batch_tokens else None
        self.rolling_context = int(rolling_context)
        self._max_gen_toks = int(max_gen_toks)
        self.generator = torch.Generator().manual_seed(int(seed))

    @property
    def _split_safe(self) -> bool:
        """Byte-level BPE with GPT-2's pre-tokenisation regex and no normaliser (our tokenizers)."""
        if not hasattr(self, "_split_ok"):
            spec = json.loads(self.tokenizer.to_str())
            pre = spec.get("pre_tokenizer") or {}
            self._split_ok = (
                spec.get("normalizer") is None
                and pre.get("type") == "ByteLevel"
                and pre.get("use_regex", True)
                and not pre.get("add_prefix_space", False)
            )
        return self._split_ok

    @classmethod
    def from_model(cls, model, tokenizer, eot_id: int, seq_len: int, **kw) -> ScalelabLM:
        """Wrap an in-memory GPT and `tokenizers.Tokenizer` (tests, notebooks)."""

        loaded = SimpleNamespace(
            model=model, tokenizer=tokenizer, eot_id=eot_id, model_config=SimpleNamespace(seq_len=seq_len)
        )
        return cls(loaded=loaded, device=kw.pop("device", "cpu"), **kw)

    # ----------------------------------------------------------------- tokenizer
    @property
    def eot_token_id(self) -> int:
        return self._eot

    @property
    def prefix_token_id(self) -> int:
        return self._eot  # exported as bos_token too, so `hf` conditions on the same token

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def max_gen_toks(self) -> int:
        return self._max_gen_toks

    @property
    def device(self):
        return self._device

    @property
    def tokenizer_name(self) -> str:
        return "scalelab"

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs) -> list[int]:
        return self.tokenizer.encode(string, add_special_tokens=False).ids

    def tok_decode(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=False)

    # ----------------------------------------------------------------- requests
    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """TemplateLM's tokenisation rules (trailing context spaces move to the continuation; the
        whole string is encoded and split after the context's tokens; an empty context becomes
        EOT), with every distinct string encoded once, in one batch call."""
        splits = []
        for ctx, cont in (r.args for r in requests):
            if ctx == "":
                splits.append((None, cont, False))
            else:
                n = len(ctx) - len(ctx.rstrip())
                c, x = ctx[: len(ctx) - n], ctx[len(ctx) - n :] + cont
                # " word" after a non-space: no pre-token crosses the boundary, so
                # encode(c + x) == encode(c) + encode(x) exactly; encode x alone (shorter)
                split = self._split_safe and x[:1] == " " and x[1:2] not in ("", " ", "\t", "\n", "\r")
                splits.append((c, x if split else c + x, split))
        strings = list({s for c, w, _ in splits for s in (c, w) if s is not None})
        ids = dict(zip(strings, (e.ids for e in self.tokenizer.encode_batch(strings, add_special_tokens=False))))
        new_reqs = []
        for (ctx, cont), (c, whole, split) in zip((r.args for r in requests), splits):
            if c is None:
                w = ids[whole]
                ctx_enc, cont_enc = ([self.prefix_token_id], w) if w[:1] != [self.prefix_token_id] else (w[:1], w[1:])
            else:
                ctx_enc = ids[c]
                cont_enc = ids[whole] if split else ids[whole][len(ctx_enc) :]
            new_reqs.append(((ctx, cont), ctx_enc, cont_enc))
        return self._loglikelihood_tokens(new_reqs, disable_tqdm=disable_tqdm)

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list[tuple[float, bool]]:
        pairs = [(ctx, cont) for _, ctx, cont in requests]
        bar = tqdm(total=len(pairs), disable=_quiet(disable_tqdm) or len(pairs) < 2, desc="loglikelihood")
        out = R.score_pairs(
            self.model,
            pairs,
            self.max_length,
            self._device,
            self.batch_size,
            self.max_batch_tokens,
            progress=bar.update,
        )
        bar.close()
        for (key, _, _), res in zip(requests, out):
            if key is not None:
                self.cache_hook.add_partial("loglikelihood", key, res)
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        windows, owner = [], []
        for i, (string,) in enumerate(req.args for req in requests):
            ws = R.rolling_windows(self.tok_encode(string), self.prefix_token_id, self.max_length, self.rolling_context)
            windows += ws
            owner += [i] * len(ws)
        scores = R.score_pairs(
            self.model, windows, self.max_length, self._device, self.batch_size, self.max_batch_tokens
        )
        totals = [0.0] * len(requests)
        for i, (lp, _) in zip(owner, scores):
            totals[i] += lp
        for req, total in zip(requests, totals):
            self.cache_hook.add_partial("loglikelihood_rolling", (req.args[0],), total)
        return totals

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        out = []
        for req in tqdm(requests, disable=_quiet(disable_tqdm) or len(requests) < 2, desc="generate_until"):
            context, gen_kwargs = req.args
            kw = dict(gen_kwargs or {})
            until = kw.pop("until", None) or []
            until = [until] if isinstance(until, str) else list(until)
            eot_text = self.tok_decode([self._eot])
            if eot_text not in until:
                until.append(eot_text)
            max_new = int(kw.pop("max_gen_toks", kw.pop("max_new_tokens", self.max_gen_toks)))
            do_sample = _bool(kw.pop("do_sample", False))
            temperature = float(kw.pop("temperature", 1.0 if do_sample else 0.0))
            if not do_sample:
                temperature = 0.0
            top_k, top_p = kw.pop("top_k", None), kw.pop("top_p", None)
            ctx = self.tok_encode(context) or [self.prefix_token_id]
            ctx = ctx[-max(1, self.max_length - max_new) :]  # left-truncate, leave room to generate
            text = R.generate(
                self.model,
                ctx,
                max_new,
                self.tok_decode,
                until,
                self._eot,
                temperature,
                int(top_k) if top_k else None,
                float(top_p) if top_p is not None else None,
                self.generator,
                self._device,
            )
            self.cache_hook.add_partial("generate_until", (context, gen_kwargs), text)
            out.append(text)
        return out


def _quiet(disable_tqdm: bool) -> bool:
    """lm-eval passes disable_tqdm=False explicitly; TQDM_DISABLE=1 (tqdm's own switch) still wins."""
    return disable_tqdm or os.environ.get("TQDM_DISABLE", "").lower() in ("1", "true", "yes")
