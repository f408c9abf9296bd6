"""`fimgate lsp`: inline completions for any LSP editor (pygls)."""
