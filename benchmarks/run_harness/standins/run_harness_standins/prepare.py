"""Data files some scripts read, made of random data of the real formats and shapes.

Run in the script's working folder before each variant (identically for all three), as
``python -m run_harness_standins.prepare NAME`` (the manifest's ``prepare`` list). Every maker is
seeded: the three variants see the same bytes.
"""

from __future__ import annotations

import gzip
import os
import pickle
import struct
import sys

import numpy as np

MAKERS = {}


def maker(function):
    MAKERS[function.__name__] = function
    return function


def _idx(path: str, array: np.ndarray) -> None:
    codes = {np.dtype(np.uint8): 0x08}
    header = struct.pack(">HBB", 0, codes[array.dtype], array.ndim) + b"".join(struct.pack(">I", d) for d in array.shape)
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(header + array.tobytes())


@maker
def mnist_idx_gz(folder: str = "datasets/mnist", train: str = "60000", test: str = "10000") -> None:
    """MNIST's four ``*-idx?-ubyte.gz`` files (as yann.lecun.com served them), random pixels
    (four in five of them 0, as in MNIST, which keeps the files small)."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.RandomState(0)
    for prefix, n in (("train", int(train)), ("t10k", int(test))):
        pixels = rng.randint(0, 256, (n, 28, 28)).astype(np.uint8)
        pixels[rng.random_sample((n, 28, 28)) < 0.8] = 0
        _idx(os.path.join(folder, f"{prefix}-images-idx3-ubyte.gz"), pixels)
        _idx(os.path.join(folder, f"{prefix}-labels-idx1-ubyte.gz"), rng.randint(0, 10, n).astype(np.uint8))


WORDS = ("the a of to and in is was for on that with by as at from his her it he she they "
         "model data train test loss time year city river house music light night water").split()


def _sentences(rng, n: int, low: int = 4, high: int = 14) -> list[str]:
    return [" ".join(rng.choice(WORDS, rng.randint(low, high))) for _ in range(n)]


@maker
def text_corpus(path: str, lines: str = "200") -> None:
    """A plain text file of random English-looking sentences, one a line."""
    rng = np.random.RandomState(1)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        out.write("\n".join(_sentences(rng, int(lines))) + "\n")


@maker
def attention_data(path: str = "data.pt", train: str = "64", valid: str = "16") -> None:
    """The file jadore801120/attention-is-all-you-need-pytorch's ``preprocess.py`` writes with
    ``torch.save``: ``{'settings': argparse.Namespace, 'dict': {'src','tgt'}: word2idx,
    'train'/'valid': {'src','tgt'}: lists of index lists with <s> ... </s>}``, random sentences.
    Written by the current torch, as a user re-running preprocess.py would."""
    import argparse

    import torch

    rng = np.random.RandomState(2)
    word2idx = {"<blank>": 0, "<unk>": 1, "<s>": 2, "</s>": 3}
    for word in WORDS:
        word2idx.setdefault(word, len(word2idx))

    def insts(n):
        return [[2] + [word2idx[w] for w in sentence.split()] + [3] for sentence in _sentences(rng, n)]

    settings = argparse.Namespace(max_word_seq_len=50, max_token_seq_len=52, min_word_count=5,
                                  keep_case=False, share_vocab=False, vocab=None, save_data=path)
    data = {
        "settings": settings,
        "dict": {"src": dict(word2idx), "tgt": dict(word2idx)},
        "train": {"src": insts(int(train)), "tgt": insts(int(train))},
        "valid": {"src": insts(int(valid)), "tgt": insts(int(valid))},
    }
    torch.save(data, path)


def main(argv: list[str]) -> int:
    for spec in argv:
        name, _, rest = spec.partition(":")
        args = [a for a in rest.split(",") if a] if rest else []
        if name not in MAKERS:
            print(f"unknown prepare step {name!r}; known: {sorted(MAKERS)}", file=sys.stderr)
            return 2
        MAKERS[name](*args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
