"""What a person in an editor sees.

vscode.py        `fimgate bench editor`: keystrokes typed into real VS Code, per client
vscode_rig.py    code-server + Chromium + playwright-core, shared with the e2e tests
key_timeline.py  where a key's time went, from the server's request log
lsp.py           `fimgate bench lsp`: the same keys to `fimgate lsp` at the protocol level
"""
