"""Faults are switched through the API, `manage.py fault` and the admin; the simulator has no pages."""
