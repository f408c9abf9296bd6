"""Backends: the contract (base.py, torch-free) and the engines that fulfil it."""
