"""The input-pipeline worker: synthetic RecordIO data, each loader kind, the train split.

Everything that touches MXNet runs in a worker process (the pytest process never imports
mxnet); the spec checks are pure and run here. No wall-clock thresholds: rates only have
to be positive and consistent with their own parts.
"""

import os
import sys

import pytest

from pytest_mxperf.proc import spawn
from pytest_mxperf.measure import runner
from pytest_mxperf.workers import pipeline, synthetic_images

CMD = [sys.executable, "-m", "pytest_mxperf.workers.pipeline"]
SMALL = {"batch_size": 8, "data_shape": [3, 32, 32], "n_images": 32, "seconds": 0.3, "threads": 1}

# make_recordio, then read the file back with ImageRecordIter and MXIndexedRecordIO
READ_BACK = """
import os, sys
from pytest_mxperf.workers.protocol import import_mxnet, serve
from pytest_mxperf.workers.synthetic_images import make_recordio

def run(spec):
    mx = import_mxnet()
    rec, idx = make_recordio(spec["dir"], spec["n"], spec["size"], seed=3, channels=spec["channels"])
    mtime = os.path.getmtime(rec)
    again = make_recordio(spec["dir"], spec["n"], spec["size"], seed=3, channels=spec["channels"])
    # round_batch (the default) fills the last batch from the start and says so in pad;
    # round_batch=False leaves garbage there with pad 0 (MXNet 1.9.1)
    it = mx.io.ImageRecordIter(path_imgrec=rec, path_imgidx=idx, batch_size=5,
                               data_shape=(spec["channels"],) + tuple(spec["size"]), verbose=False)
    count, labels, shape = 0, [], None
    for batch in it:
        n = batch.data[0].shape[0] - batch.pad
        count += n
        labels += batch.label[0].asnumpy()[:n].tolist()
        shape = list(batch.data[0].shape[1:])
    keys = mx.recordio.MXIndexedRecordIO(idx, rec, "r").keys
    return {"status": "ok", "message": "", "count": count, "labels": labels, "shape": shape,
            "keys": len(keys), "cached": again == (rec, idx) and os.path.getmtime(rec) == mtime,
            "files": sorted(os.listdir(spec["dir"]))}

serve(run)
"""


def env():
    return spawn.with_package_path(os.environ)


def run_worker(spec, command=CMD, timeout=300):
    out = runner.run_process(command, spec, timeout=timeout, env=env())
    assert out.payload is not None, f"{out.status}: {out.message} {out.stderr_tail}"
    return out.payload


@pytest.mark.parametrize("channels", [3, 1])
def test_make_recordio_is_readable_by_image_record_iter_and_cached(tmp_path, channels):
    res = run_worker({"dir": str(tmp_path), "n": 13, "size": [24, 20], "channels": channels},
                     command=[sys.executable, "-c", READ_BACK])
    assert res["status"] == "ok", res["message"]
    assert res["count"] == 13 and res["keys"] == 13
    assert res["labels"] == [float(i % synthetic_images.NUM_LABELS) for i in range(13)]
    assert res["shape"] == [channels, 24, 20]
    assert res["cached"]
    stem = f"synthetic-n13-c{channels}-24x20-seed3"
    assert res["files"] == [stem + ".idx", stem + ".rec"]  # no temporary files left


@pytest.mark.parametrize("loader", pipeline.LOADERS)
def test_each_loader_kind_reports_a_positive_rate(tmp_path, loader):
    res = run_worker(dict(SMALL, loader=loader, data_dir=str(tmp_path)))
    assert res["status"] == "ok", res["message"]
    assert res["samples_per_s"] > 0 and res["seconds"] > 0
    assert res["batches"] >= 2 and len(res["per_batch_seconds"]) == res["batches"]
    assert res["samples"] == res["batches"] * SMALL["batch_size"]  # 32 images: no padded batch
    assert res["samples_per_s"] == pytest.approx(res["samples"] / res["seconds"])
    assert res["units"]["samples_per_s"] == "samples/s"
    assert ("read_mb_per_s" in res) == loader.endswith("imagerecord")
    assert "end_to_end_samples_per_s" not in res
    # an ndarray loader's batches are fresh 19 MB outputs: its worker keeps freed memory in
    # glibc's heap (this Linux's C library), an imagerecord loader's leaves it as it is
    assert res["meta"]["heap_kept"] is (True if loader.endswith("ndarray") else None), res["meta"]


def test_augmented_image_record_iter_keeps_the_crop_shape(tmp_path):
    # seed 5 (weights, crops) reads the images of data_seed 0: every process of a cell the same file
    res = run_worker(dict(SMALL, loader="imagerecord", augment=True, threads=2, seed=5, data_dir=str(tmp_path)))
    assert res["status"] == "ok", res["message"]
    assert res["augment"] is True and res["image_size"] == [37, 37] and res["samples_per_s"] > 0
    assert sorted(os.listdir(tmp_path)) == ["synthetic-n32-c3-37x37-seed0.idx", "synthetic-n32-c3-37x37-seed0.rec"]
    assert res["meta"]["peak_rss_bytes"] > 0 and res["meta"]["mxnet_version"]


def test_train_split_reports_load_and_compute_time(tmp_path):
    k = 3
    res = run_worker({"loader": "prefetch-imagerecord", "batch_size": 16, "n_images": 64, "seconds": 0.3,
                      "threads": 1, "data_dir": str(tmp_path), "train_model": "lenet", "train_batches": k})
    assert res["status"] == "ok", res["message"]
    assert res["data_shape"] == [1, 28, 28]  # the model's input shape by default
    tr = res["train"]
    assert len(tr["load_seconds"]) == len(tr["compute_seconds"]) == len(tr["synthetic_seconds"]) == k
    assert res["load_seconds_per_batch"] > 0 and res["compute_seconds_per_batch"] > 0
    assert res["end_to_end_samples_per_s"] == pytest.approx(
        16 / (res["load_seconds_per_batch"] + res["compute_seconds_per_batch"]))
    assert res["synthetic_samples_per_s"] > 0
    assert 0 < res["load_share"] < 1
    assert res["loader_bound"] == (res["samples_per_s"] < res["synthetic_samples_per_s"])


def test_a_bad_spec_gives_a_one_line_error(tmp_path):
    res = run_worker({"loader": "lmdb", "data_dir": str(tmp_path)})
    assert res["status"] == "error"
    assert "unknown loader 'lmdb'" in res["message"] and "\n" not in res["message"]
    assert not list(tmp_path.iterdir())  # refused before any data was written


def test_without_pillow_building_the_data_set_is_a_one_line_error(tmp_path):
    command = [sys.executable, "-c", "import sys; sys.modules['PIL'] = None\n"
               "from pytest_mxperf.workers.pipeline import main; main()"]
    res = run_worker(dict(SMALL, loader="imagerecord", data_dir=str(tmp_path)), command=command)
    assert res["status"] == "error"
    assert "needs Pillow" in res["message"] and "\n" not in res["message"]
    assert not [f for f in os.listdir(tmp_path) if f.endswith((".rec", ".idx"))]  # no half data set


def test_a_corrupt_record_file_is_a_one_line_error(tmp_path):
    stem = tmp_path / "synthetic-n32-c3-37x37-seed0"
    (tmp_path / (stem.name + ".rec")).write_bytes(b"not a record file" * 64)
    (tmp_path / (stem.name + ".idx")).write_text("".join(f"{i}\t{8 * i}\n" for i in range(32)))
    res = run_worker(dict(SMALL, loader="imagerecord", data_dir=str(tmp_path)))
    assert res["status"] == "error", res
    assert "yielded no batch" in res["message"] and "\n" not in res["message"]


@pytest.mark.parametrize("spec, words", [
    ({"loader": "ndarray", "augment": True}, "augment applies to imagerecord"),
    ({"loader": "imagerecord", "batch": 8}, "unknown pipeline spec keys ['batch']"),
    ({"loader": "imagerecord", "train_model": "lenet", "data_shape": [3, 28, 28]}, "not lenet's input shape"),
    ({"loader": "imagerecord", "train_model": "resnet9000"}, "unknown model 'resnet9000'"),
    ({"loader": "imagerecord", "n_images": 4, "batch_size": 8}, "at least one batch"),
    ({"loader": "imagerecord", "data_shape": [3, 224, 224], "image_size": [200, 256]}, "at least the crop"),
    ({"loader": "imagerecord", "data_shape": [2, 28, 28]}, "C 1 or 3"),
])
def test_check_spec_refuses(spec, words):
    with pytest.raises(ValueError) as err:
        pipeline.check_spec(dict(spec, data_dir="/nonexistent"))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_check_spec_defaults():
    s = pipeline.check_spec({"loader": "imagerecord", "train_model": "resnet50_v2", "data_dir": "/x"})
    assert s["data_shape"] == [3, 224, 224] and s["image_size"] == [256, 256]
    assert s["batch_size"] == 32 and s["augment"] is False and s["threads"] >= 1
    s = pipeline.check_spec({"loader": "ndarray", "data_shape": [1, 28, 28], "data_dir": "/x"})
    assert s["image_size"] == [32, 32]
