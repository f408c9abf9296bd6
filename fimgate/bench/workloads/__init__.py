"""What benchmarks replay: keystroke traces (reading, debouncing, building them from git history),
the multi-user office workload, and HumanEval infilling problems.
May import: fimgate.bench, and anything below it.
"""
