"""The dashboard stores nothing: it reads telemetry and inventory (selectors.py)
and pushes what changed (broadcaster.py, events.py)."""
