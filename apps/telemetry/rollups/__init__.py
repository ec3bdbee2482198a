"""Per-minute rollups, the latency sketches they merge, per-endpoint minutes and retention."""
