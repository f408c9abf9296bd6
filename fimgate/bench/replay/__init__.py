"""`fimgate bench replay` and `bench prefill`: a keystroke trace through the service `serve` runs.

command.py        the command: flags to strategies, peers, schedules; the summary
simulate.py       the replay, one request at a time (`--serial`) and its bookkeeping
batched.py        the replay on the embedded engine's batching scheduler (the default)
live.py           `--live URL`: in real time against a running gateway
strategies.py     how each strategy turns an editor request into a plan
baseline.py       what editors send today (the PSM window)
prefill_count.py  `fimgate bench prefill`: token counts only, no model
"""
