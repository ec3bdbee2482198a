"""Storing telemetry: the durable buffer, the writer that moves it into the time-partitioned raw tables."""
