"""The language server (`fimgate lsp`) arrives with issue 7; this package holds its code."""
