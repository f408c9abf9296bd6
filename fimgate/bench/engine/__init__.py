"""`fimgate bench engine`: one engine's speed, alone.

speed.py         decode, 1-token append and prefill, against peers; the memory-bandwidth floor
batch_decode.py  `--batch N`: N sequences decoding at once
busy_cores.py    `--background N`: beside N busy loops
random_model.py  a model of a given shape with random weights (GPU checks)
gpu_check.sh     the script a lent GPU machine runs
"""
