#!/usr/bin/env python3
"""Write pytest_mxperf/data/digits28.npz: the UCI handwritten digits at 28x28, split.

The source is scikit-learn's bundled copy of the UCI ML hand-written digits data set
(E. Alpaydin & C. Kaynak; 1797 grey images of 8x8 pixels, values 0..16, 10 classes).
scikit-learn must NOT be installed into the suite's venv (when importable, mxnet imports
it, which costs every worker 0.65 s and a second OpenMP runtime), so run this with a
throwaway venv:

    python3 -m venv /tmp/skl && /tmp/skl/bin/pip install scikit-learn numpy
    /tmp/skl/bin/python scripts/make_digits_npz.py            # writes the npz
    /tmp/skl/bin/python scripts/make_digits_npz.py --check    # verify a committed copy

Processing (numpy only): each 8x8 image is scaled to 20x20 with bilinear interpolation
(pixel centres aligned, edges clamped) and centred in a 28x28 frame with a 4-pixel
border, as MNIST centres its digits in a 20x20 box; values 0..16 are mapped to 0..255
and stored as uint8 (the convergence worker divides by 255). The split is a seeded
(seed 0) stratified permutation: 20% of every class is held out for validation.
"""

import argparse
import hashlib
import io
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "pytest_mxperf" / "data" / "digits28.npz"
SEED = 0
VAL_FRACTION = 0.2
BOX = 20
SIZE = 28


def bilinear(img, out):
    """Resize a 2-D array to (out, out), pixel centres aligned (as cv2/PIL 'bilinear')."""
    n = img.shape[0]
    pos = (np.arange(out) + 0.5) * n / out - 0.5
    pos = np.clip(pos, 0, n - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    w = pos - lo
    rows = img[lo, :] * (1 - w)[:, None] + img[hi, :] * w[:, None]
    return rows[:, lo] * (1 - w)[None, :] + rows[:, hi] * w[None, :]


def to28(images8):
    out = np.zeros((len(images8), SIZE, SIZE), dtype=np.uint8)
    pad = (SIZE - BOX) // 2
    for i, im in enumerate(images8):
        big = bilinear(im.astype(np.float64) / 16.0, BOX)
        out[i, pad:pad + BOX, pad:pad + BOX] = np.clip(np.rint(big * 255.0), 0, 255).astype(np.uint8)
    return out


def split(labels, seed=SEED, frac=VAL_FRACTION):
    rng = np.random.RandomState(seed)
    train, val = [], []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        rng.shuffle(idx)
        k = int(round(len(idx) * frac))
        val.extend(idx[:k])
        train.extend(idx[k:])
    train, val = np.array(sorted(train)), np.array(sorted(val))
    rng.shuffle(train)
    rng.shuffle(val)
    return train, val


def build():
    from sklearn.datasets import load_digits
    import sklearn

    d = load_digits()
    x = to28(d.images)
    y = d.target.astype(np.uint8)
    tr, va = split(y)
    meta = (f"UCI ML hand-written digits (E. Alpaydin, C. Kaynak), via scikit-learn {sklearn.__version__} "
            f"load_digits(); 8x8 -> bilinear {BOX}x{BOX} centred in {SIZE}x{SIZE}, uint8 0..255; "
            f"stratified split seed {SEED}, {VAL_FRACTION:.0%} validation")
    return {"x_train": x[tr], "y_train": y[tr], "x_val": x[va], "y_val": y[va], "meta": np.array(meta)}


def digest(arrays):
    h = hashlib.sha256()
    for k in ("x_train", "y_train", "x_val", "y_val"):
        h.update(np.ascontiguousarray(arrays[k]).tobytes())
    return h.hexdigest()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--check", action="store_true", help="compare with the existing file instead of writing")
    args = ap.parse_args(argv)
    arrays = build()
    if args.check:
        with np.load(args.out) as z:
            same = digest({k: z[k] for k in z.files}) == digest(arrays)
        print("identical" if same else "DIFFERENT", args.out)
        return 0 if same else 1
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_bytes(buf.getvalue())
    print(f"wrote {args.out}: train {arrays['x_train'].shape}, val {arrays['x_val'].shape}, "
          f"{len(buf.getvalue())} bytes, sha256(arrays) {digest(arrays)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
