"""`fimgate lsp`: inline completions for any LSP editor (pygls; LSP 3.18 textDocument/inlineCompletion),
through a running gateway over HTTP or an in-process service.
May import: fimgate.gateway, fimgate.efim, fimgate.backend.
"""
