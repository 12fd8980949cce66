"""The training corpus: the Python standard library sources, split by file.

Split rule (documented in models/README.md): a file is held out iff
int(sha256(relative path).hexdigest()[:8], 16) % 50 == 0, i.e. ~2% of files. Splitting by
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


def is_heldout(relpath):
    digest = hashlib.sha256(relpath.encode("utf-8")).hexdigest()
    return int(digest[:8], 16) % HELDOUT_MODULUS == 0


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
