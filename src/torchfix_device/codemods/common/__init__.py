"""Helpers several rules share (a helper of one rule lives in that rule's package).
"""
