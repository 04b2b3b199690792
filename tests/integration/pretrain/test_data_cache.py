"""Cache reuse, change detection, split stability and atomic writes on a small tmp corpus."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


from pretrain.data.prepare import load_prepared
from pretrain.errors import DataError

# shared with the unit tests
from tests.unit.pretrain.test_data_cache import corpus, make_cfg, paragraphs, run  # noqa: F401


def test_killed_prepare_leaves_no_valid_looking_output(corpus):
    """SIGKILL in the middle of writing shards: no out dir appears; the next run cleans up and builds."""
    cfg = make_cfg(corpus)
    script = textwrap.dedent(f"""
        import os, signal
        from pretrain.data import shards
        from pretrain.data.config import DataConfig
        from pretrain.data.prepare import prepare
        real = shards.ShardWriter.write
        def write(self, ids):
            real(self, ids)
            os.kill(os.getpid(), signal.SIGKILL)
        shards.ShardWriter.write = write
        prepare(DataConfig.model_validate({cfg.model_dump(mode="json")!r}), log=lambda m: None)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    out = Path(cfg.out_dir)
    assert not out.exists()
    assert [p for p in out.parent.iterdir() if p.name.startswith(".out.tmp-")]  # the half-written build
    with pytest.raises(DataError):
        load_prepared(out)
    data, _ = run(cfg)
    assert not data.reused and load_prepared(out).fingerprint == data.fingerprint
    assert not [p for p in out.parent.iterdir() if ".tmp-" in p.name]


def test_concurrent_prepares_build_once(corpus):
    """Every rank of a job may call prepare(): the lock makes one build and the others reuse it."""
    cfg = make_cfg(corpus)
    script = (
        "import sys; from pretrain.data.config import DataConfig; from pretrain.data.prepare import prepare; "
        f"d = prepare(DataConfig.model_validate({cfg.model_dump(mode='json')!r})); "
        "print('REUSED' if d.reused else 'BUILT')"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    results = sorted(o.strip().splitlines()[-1] for o, _ in outs)
    assert results == ["BUILT", "REUSED"], outs
    assert load_prepared(cfg.out_dir).meta["splits"]["val"]["documents"] >= 1
