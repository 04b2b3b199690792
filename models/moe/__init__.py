"""Mixture-of-experts FFN layers: routers, dispatchers, grouped experts, the bias update
(`balance`), accounting and metrics.

Pure PyTorch: nothing here knows about DeepSpeed. Expert parallelism is applied to a built
model by `pretrain.engine.expert_parallel.prepare_moe`, which swaps each block's `LocalDispatcher` for
an `AllToAllDispatcher` on an expert-parallel process group.
"""
