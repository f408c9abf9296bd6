"""efim: FIM templates, the EFIM planner, fragment tokenization, cursor offsets and clean-up rules.
Pure Python: no torch, no I/O. May import: fimgate.backend.base (the contract types) only.
"""
