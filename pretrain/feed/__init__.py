"""The training feed: what the trainer reads from prepared data each step (windows from the memory-mapped
shards, a mixture's quotas, the held-out parts). It imports torch; the preparation that writes those shards
(pretrain/data/) does not."""
