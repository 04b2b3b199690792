"""The tokenizer's training sample: a seeded, order-independent sample of whole documents.

Each train document gets a seeded 64-bit key; the sample is the documents with the smallest keys
whose lengths add up to the budget (`tokenizer.sample_chars`). It depends only on the documents'
content and the seed, not on file order, and holds about the budget in memory while the corpus
streams past. A corpus smaller than the budget is sampled whole.
"""

from __future__ import annotations

import heapq
from itertools import count

from pretrain.data.split import doc_key


def sample_key(text: str, seed: int) -> int:
    return doc_key(text, f"tokenizer-sample-{seed}")


class DocumentSample:
    def __init__(self, budget_chars: int, seed: int):
        self.budget, self.seed = budget_chars, seed
        self._heap: list[tuple[int, int, str]] = []  # (-key, arrival, text): the largest key on top
        self._order = count()
        self.chars = 0
        self.seen_documents = 0
        self.seen_chars = 0

    def offer(self, text: str) -> None:
        self.seen_documents += 1
        self.seen_chars += len(text)
        key = sample_key(text, self.seed)
        heap = self._heap
        if self.chars >= self.budget and heap and key >= -heap[0][0]:
            return  # would be the largest key of a full sample: dropped at once
        heapq.heappush(heap, (-key, next(self._order), text))
        self.chars += len(text)
        while len(heap) > 1 and self.chars - len(heap[0][2]) >= self.budget:
            self.chars -= len(heapq.heappop(heap)[2])

    def texts(self) -> list[str]:
        """The sampled documents, smallest key first."""
        return [t for _, _, t in sorted(self._heap, key=lambda e: (-e[0], e[1]))]

    def __len__(self) -> int:
        return len(self._heap)
