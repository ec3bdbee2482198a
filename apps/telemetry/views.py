"""Telemetry has no pages of its own: the live dashboard (apps.dashboard) shows it."""
