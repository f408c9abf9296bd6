"""efim: FIM templates, the EFIM planner and fragment tokenization. Pure Python: no torch, no I/O."""
