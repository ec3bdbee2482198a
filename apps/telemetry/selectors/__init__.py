"""Reads of telemetry, one module per reader: import the module you need (nothing is re-exported here)."""
