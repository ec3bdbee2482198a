# No filterable models of its own.
