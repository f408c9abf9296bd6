"""The model: GGUF and Hugging Face weights, tokenizers, the Llama-family forward pass
(fp32 / bf16 / int8 linears, the screened output head, the one-call C step) and the bundled model.
May import: fimgate.backend (the contract), fimgate.kernels.
"""
