"""fimgate: fill-in-the-middle completions while a person types.

    fimgate/
      cli.py      the `fimgate` command (a dispatcher: serve, lsp, complete, models, bench)
      lsp/        `fimgate lsp`: a language server for any LSP editor
      gateway/    the HTTP gateway and the service that plans, runs and cleans up a completion
      efim/       FIM templates, the EFIM planner, fragment tokenization (pure Python)
      backend/    the backend contract, and the engines behind it (embedded/, model/, vllm/)
      kernels/    numeric primitives: RoPE re-rotation, the CPU C kernels
      bench/      benchmarks that drive the same service the server runs

Imports run one way: lsp, gateway -> efim -> backend -> kernels (tests/unit/test_layout.py).
"""

__version__ = "0.1.0"
