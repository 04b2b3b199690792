"""What the trainer reads from prepared data: the train sampler, the held-out parts, and the
accounting of repetition (epochs over the training split's unique tokens, per mixture component).

Everything reads the memory-mapped shards through `TokenStream`s; no split is loaded whole.
`epochs` = tokens trained / unique tokens of the train split (each distinct document counted
once, `meta.json` `splits.train.unique_tokens`); for a mixture, over the sum of the components'
unique train tokens, and per component over its own.
"""

from __future__ import annotations

from pretrain.evaluation import EvalPart
from pretrain.feed.sampler import MixtureSampler, WindowSampler


def _stream(data, split: str):
    return data.token_stream(split) if hasattr(data, "token_stream") else data.split_tokens(split)


def _unique(data, split: str, tokens) -> int:
    return data.unique_tokens(split) if hasattr(data, "unique_tokens") else len(tokens)


class TrainFeed:
    def __init__(self, data, seq_len: int, seed: int):
        self.seq_len = seq_len
        components = getattr(data, "components", None)
        if components:
            self.labels = [c.label for c in components]
            streams = [_stream(c.data, "train") for c in components]
            self.unique = [_unique(c.data, "train", s) for c, s in zip(components, streams)]
            self.weights = [c.weight for c in components]
            self.sampler = MixtureSampler(streams, self.weights, seq_len, seed, data.period)
            self.val_parts = [
                EvalPart(c.label, _stream(c.data, "val"), c.data.bytes_per_token("val"), c.weight) for c in components
            ]
        else:
            self.labels, self.weights = [], []
            train = _stream(data, "train")
            self.unique = [_unique(data, "train", train)]
            self.sampler = WindowSampler(train, seq_len, seed)
            self.val_parts = [EvalPart(None, _stream(data, "val"), data.bytes_per_token("val"))]

    @property
    def unique_tokens(self) -> int:
        return sum(self.unique)

    def epochs(self, tokens: int) -> float:
        """Passes over the training split's unique tokens."""
        return tokens / self.unique_tokens

    def source_tokens(self, samples: int) -> dict[str, int]:
        """`tokens/<label>` per mixture component after `samples` samples (empty without a mixture)."""
        if not self.labels:
            return {}
        counts = self.sampler.counts(samples) * self.seq_len
        return {f"tokens/{label}": int(n) for label, n in zip(self.labels, counts)}

    def summary(self, tokens: int, samples: int) -> dict:
        out = {"epochs": self.epochs(tokens), "unique_tokens": self.unique_tokens}
        for (key, n), label, unique, weight in zip(
            self.source_tokens(samples).items(), self.labels, self.unique, self.weights
        ):
            out[key] = n
            out[f"unique_tokens/{label}"] = unique
            out[f"epochs/{label}"] = n / unique
            out[f"weight/{label}"] = weight
        return out

    def repetition_warning(self, tokens: int, samples: int, limit: float | None) -> str | None:
        """A message when the planned run repeats its data (or any mixture component) more than `limit` times."""
        if limit is None:
            return None
        over = []
        if self.epochs(tokens) > limit:
            over.append(
                f"{self.epochs(tokens):.1f} epochs over the training split's {self.unique_tokens:,} unique tokens"
            )
        if self.labels:
            for key, n in self.source_tokens(samples).items():
                label = key.split("/", 1)[1]
                unique = self.unique[self.labels.index(label)]
                if n / unique > limit:
                    over.append(f"{n / unique:.1f} epochs over {label}'s {unique:,} unique tokens")
        if not over:
            return None
        return (
            f"this run plans {tokens:,} training tokens: " + "; ".join(over) + f" (more than train.max_epochs_warn="
            f"{limit:g}); its loss measures memorisation as well as learning: use a larger corpus or fewer tokens"
        )
