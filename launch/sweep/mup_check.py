"""What width-μP does not cover: runs under `model.parametrization: mup` that differ in depth or batch.

μP makes the optimal lr (and init) of a base width the optimal lr of wider models with the same
depth, trained at the same batch (tokens per step). A sweep whose μP runs also change
`model.n_layers` or the global batch transfers the lr beyond what the parametrization covers
(depth needs CompleteP-style residual scaling; the optimal lr moves with the batch): one warning
line names what differs. It is a warning, not an error: the transfer may still be good enough, and
the fits will tell.
"""

from __future__ import annotations


def _values(vals: set[int]) -> str:
    return ", ".join(str(v) for v in sorted(vals))


def mup_transfer_warning(cfgs: list) -> str | None:
    """One line naming what differs (depth, tokens per step) among the validated TrainConfigs under
    mup, or None when they share both (or fewer than two are under mup)."""
    mup = [c for c in cfgs if c.model.parametrization == "mup"]
    if len(mup) < 2:
        return None
    depths = {c.model.n_layers for c in mup}
    batches = {c.tokens_per_step() for c in mup}
    differs = []
    if len(depths) > 1:
        differs.append(f"model.n_layers ({_values(depths)})")
    if len(batches) > 1:
        differs.append(f"tokens per step, train.global_batch_size x model.seq_len ({_values(batches)})")
    if not differs:
        return None
    return (
        f"warning: {len(mup)} runs under model.parametrization mup differ in {' and '.join(differs)}: "
        "width-μP transfers the lr across width only, not across depth or batch size (docs/mup.md)"
    )
