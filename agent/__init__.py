"""The standalone node agent lives in ``agent.cp_agent`` (no Django)."""
