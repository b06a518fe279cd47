"""The synthetic image data set the input-pipeline worker reads: JPEGs made by the code (no
download) in an indexed RecordIO file, cached by name.

``make_recordio`` writes synthetic JPEGs (smooth gradients, noise and filled shapes,
quality 90: about 30 KB at 256x256, like an ImageNet file resized to 256) into an indexed
RecordIO file (``.rec`` + ``.idx``), cached in ``data_dir`` by (count, size, channels,
seed). Images are stored at ``image_size`` (default: the crop size x 8/7, e.g. 256 for
224, 32 for 28) and cut to ``data_shape`` by ImageRecordIter: centre crop, or with
``augment`` a random crop and a random mirror. Pixels are scaled to [0, 1].
"""

from __future__ import annotations

import io
import os
from pathlib import Path

from pytest_mxperf.workers.protocol import import_mxnet

NUM_LABELS = 10  # labels are i % 10: valid for every zoo model
JPEG_QUALITY = 90


def synthetic_jpeg(rng, size, channels=3) -> bytes:
    """One JPEG of ``size`` (H, W): two gradients, Gaussian noise and eight filled shapes."""
    import numpy as np
    try:
        from PIL import Image, ImageDraw
    except ImportError:  # MXNet's wheel has no Python cv2 either: nothing here can encode JPEG
        raise RuntimeError("building the synthetic RecordIO data set needs Pillow "
                           "(pip install Pillow) in this interpreter") from None

    h, w = size
    yy, xx = np.mgrid[0:h, 0:w]
    planes = [(xx * rng.uniform(0.2, 1.0) + yy * rng.uniform(0.2, 1.0)) % 256 for _ in range(3)]
    pixels = np.stack(planes, -1) + rng.normal(0.0, 25.0, size=(h, w, 3))
    img = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(8):
        x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
        x1, y1 = x0 + int(rng.integers(2, w // 2 + 3)), y0 + int(rng.integers(2, h // 2 + 3))
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)([x0, y0, x1, y1], fill=colour)
    if channels == 1:
        img = img.convert("L")
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=JPEG_QUALITY)
    return buf.getvalue()


def make_recordio(directory, n_images, size=(256, 256), seed=0, channels=3):
    """Write (or find in the cache) ``n_images`` synthetic JPEGs as an indexed RecordIO file.

    Returns ``(rec_path, idx_path)`` in ``directory``, named by (count, channels, size,
    seed). Record i has id i and label ``i % 10``. Written under temporary names and
    renamed, so a concurrent or killed writer never leaves a half file under the real name.
    """
    import numpy as np

    h, w = (int(v) for v in size)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stem = directory / f"synthetic-n{int(n_images)}-c{channels}-{h}x{w}-seed{int(seed)}"
    rec, idx = Path(f"{stem}.rec"), Path(f"{stem}.idx")
    if rec.exists() and idx.exists():
        return str(rec), str(idx)
    mx = import_mxnet()
    rng = np.random.default_rng(seed)
    tmp_rec, tmp_idx = Path(f"{stem}.{os.getpid()}.rec.tmp"), Path(f"{stem}.{os.getpid()}.idx.tmp")
    writer = mx.recordio.MXIndexedRecordIO(str(tmp_idx), str(tmp_rec), "w")
    try:
        for i in range(int(n_images)):
            # pack, not pack_img: pack_img encodes with cv2, which the wheel does not bundle
            header = mx.recordio.IRHeader(0, float(i % NUM_LABELS), i, 0)
            writer.write_idx(i, mx.recordio.pack(header, synthetic_jpeg(rng, (h, w), channels)))
    finally:
        writer.close()
    os.replace(tmp_rec, rec)
    os.replace(tmp_idx, idx)
    return str(rec), str(idx)


def default_data_dir() -> str:
    """The suite's persistent cache (as ``spawn.cache_dir``, which is parent side): the data
    set is built once per machine and found again by name."""
    root = os.environ.get("MXPERF_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "pytest-mxperf")
    return os.path.join(root, "recordio")
