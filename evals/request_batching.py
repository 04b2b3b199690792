"""Request batching: which forward passes score a list of (context, continuation) token pairs (torch-free).

`prefix_groups` finds the prefixes that inputs share (the context of a question's choices, the words
of a minimal pair up to their difference) so that each runs once; `batches` groups rows of
similar length. `evals.requests.score_pairs` runs the passes.
"""

from __future__ import annotations

from collections.abc import Sequence

Pair = tuple[Sequence[int], Sequence[int]]


def truncate_pair(context: Sequence[int], continuation: Sequence[int], max_length: int) -> tuple[list[int], int]:
    """Model input (last `max_length` tokens of context+continuation minus its last token) and
    how many continuation tokens are scored (all of them unless longer than the window)."""
    whole = (list(context) + list(continuation))[-(max_length + 1) :]
    inp = whole[:-1]
    return inp, min(len(continuation), len(inp))


def batches(
    order: Sequence[int],
    lengths: Sequence[int],
    batch_size: int | None,
    max_batch_tokens: int | None,
    max_padding: float = 0.1,
    past: Sequence[int] | None = None,
) -> list[list[int]]:
    """Group indices (sorted longest first) into batches of at most `batch_size` rows and
    `max_batch_tokens` tokens (rows x (longest row + longest `past` it attends to)), with at most
    `max_padding` of the rows' tokens padding: a long-tailed mix of lengths would otherwise pad
    most rows to its longest."""
    out, cur, width, past_w, real = [], [], 0, 0, 0
    for i in order:
        w, pw, n = max(width, lengths[i]), max(past_w, past[i] if past else 0), len(cur) + 1
        if cur and (
            (batch_size and n > batch_size)
            or (max_batch_tokens and (w + pw) * n > max_batch_tokens)
            or w * n - real - lengths[i] > max_padding * w * n
        ):
            out.append(cur)
            cur, w, pw, real = [], lengths[i], past[i] if past else 0, 0
        cur.append(i)
        width, past_w, real = w, pw, real + lengths[i]
    if cur:
        out.append(cur)
    return out


Member = tuple[int, tuple[int, ...], tuple[int, ...]]  # (distinct pair, branch tokens, target tokens)
MIN_SHARED = 2  # sharing a single token (the EOT of empty contexts) is not worth a second pass


def prefix_groups(pairs: Sequence[Pair], max_length: int) -> tuple[list[int], int, dict[tuple[int, ...], list[Member]]]:
    """How `score_pairs` runs `pairs`: (distinct pair of each pair, number of distinct pairs, groups).

    `groups` maps the tokens of a pass-1 row (a prefix) to its members: a distinct pair, the
    tokens it runs in pass 2 after the prefix, and its target tokens, which are predicted by the
    last len(targets) positions of prefix + branch. Model inputs that start alike share a prefix:
    the choices of a question share its context (and the words their answers start with), the
    two sentences of a minimal pair share their words up to the difference. The prefixes are the
    branch points of the inputs' trie (from the sorted inputs and their common prefix lengths),
    taken bottom-up where sharing the deeper prefix saves more tokens than leaving its inputs to
    the next prefix up; an input that shares with no other runs whole in pass 1, with no branch.
    """
    index: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
    which = [index.setdefault((tuple(c), tuple(x)), len(index)) for c, x in pairs]
    items = []  # (model input, distinct pair, targets) of the pairs with something to score
    for (ctx, cont), k in index.items():
        inp, n = truncate_pair(ctx, cont, max_length)
        if n:
            items.append((tuple(inp), k, cont[len(cont) - n :]))
    items.sort()
    groups: dict[tuple[int, ...], list[Member]] = {}

    def close(depth: int, members: list[int], parent: int) -> list[int]:
        """Group `members` under their common `depth` tokens, or hand them up to `parent`."""
        if len(members) > 1 and depth >= MIN_SHARED and (len(members) - 1) * depth >= len(members) * parent:
            groups.setdefault(items[members[0]][0][:depth], []).extend(
                (items[m][1], items[m][0][depth:], items[m][2]) for m in members
            )
            return []
        return members

    stack: list[tuple[int, list[int]]] = [(0, [])]  # open trie branches: (depth, members not grouped)
    for i in range(len(items) + 1):
        shared = _common(items[i - 1][0], items[i][0]) if 0 < i < len(items) else 0
        up: list[int] = []
        while stack[-1][0] > shared:  # branches that end here, deepest first
            depth, members = stack.pop()
            up = close(depth, members + up, max(shared, stack[-1][0]))
        if stack[-1][0] < shared:
            stack.append((shared, up))
        else:
            stack[-1][1].extend(up)
        if i < len(items):
            if len(items[i][0]) > stack[-1][0]:
                stack.append((len(items[i][0]), [i]))
            else:  # the input is the branch point itself
                stack[-1][1].append(i)
    for m in stack[0][1]:
        inp, k, targets = items[m]
        groups.setdefault(inp, []).append((k, (), targets))
    return which, len(index), groups


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix of a and b."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
