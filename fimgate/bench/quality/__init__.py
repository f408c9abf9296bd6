"""`fimgate bench quality` and `bench shape`: what the suggestions are worth.

infilling.py  HumanEval infilling per strategy: pass@1, exact match, edit similarity
repo.py       `--dataset repo`: holes from a real repository's history, with context chunks
sandbox.py    running generated code under limits
shape.py      `fimgate bench shape`: suggestions shaped as editors show them
"""
