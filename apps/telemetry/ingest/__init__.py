"""The ingest path: the wire batch decoded and validated whole, and the lean ASGI path in front of Django."""
