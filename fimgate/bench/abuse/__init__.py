"""`fimgate bench abuse`: people's time to first token beside one abusive client per case.

cases.py  the gateway under test, the people, the HTTP abusers, the run
lsp.py    the `fimgate lsp --tcp` attacks and the honest LSP client beside them
"""
