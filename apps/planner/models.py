"""The planner stores nothing: its formulas are pure functions (formulas.py)
over request inputs and live reads (selectors.py)."""
