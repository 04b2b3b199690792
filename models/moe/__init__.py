"""Mixture-of-experts FFN layers: routers, dispatch, grouped experts, accounting and metrics.

Pure PyTorch: nothing here knows about DeepSpeed. Expert parallelism is applied to a built
model by `pretrain.expert_parallel.prepare_moe`, which hands the dispatcher a process group.
"""
