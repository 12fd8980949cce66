"""The training corpus: the Python standard library sources, split by file.

Split rule (documented in models/README.md): a file is held out iff
int(sha256(relative path).hexdigest()[:8], 16) % 50 == 0, i.e. ~2% of files. Of the rest,
the files where it is 1, 2 or 3 are the validation set (~6%, for early stopping; fewer
files would be mostly encodings/ tables, far easier than the held-out mix); the tokenizer
is trained on all non-held-out files, the models on the non-validation ones. Splitting by
file (not by window) keeps every held-out line unseen, and hashing the path makes the
split independent of file order, machine and Python version.
"""
import hashlib
import os

DEFAULT_ROOT = "/usr/lib/python3.11"
EXCLUDED_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}
HELDOUT_MODULUS = 50


def list_files(root=DEFAULT_ROOT):
    """Relative paths of every *.py under root outside the excluded folders, sorted."""
    paths = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in EXCLUDED_DIRS)
        for name in filenames:
            if name.endswith(".py"):
                paths.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(paths)


def _residue(relpath):
    return int(hashlib.sha256(relpath.encode("utf-8")).hexdigest()[:8], 16) % HELDOUT_MODULUS


def is_heldout(relpath):
    return _residue(relpath) == 0


def is_validation(relpath):
    return 1 <= _residue(relpath) <= 3


def read_text(root, relpath):
    # Bytes that are not UTF-8 become U+FFFD so every document is well-formed text.
    with open(os.path.join(root, relpath), "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def load(root=DEFAULT_ROOT):
    """{'train': [(path, text)], 'heldout': [(path, text)]} plus size statistics."""
    split = {"train": [], "heldout": []}
    for rel in list_files(root):
        split["heldout" if is_heldout(rel) else "train"].append((rel, read_text(root, rel)))
    stats = {
        name: {"files": len(docs), "bytes": sum(len(t.encode("utf-8")) for _, t in docs)}
        for name, docs in split.items()
    }
    return split, stats
