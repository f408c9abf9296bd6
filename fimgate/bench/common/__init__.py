"""Helpers every benchmark shares.

checkout.py    where the checkout and ../shared are
memory.py      a process's resident memory
paired.py      paired differences and bootstrap intervals between rows
plot.py        the figures (replay CDFs, editor timelines)
served.py      `fimgate serve` as a subprocess on a free port
similarity.py  edit similarity
"""
