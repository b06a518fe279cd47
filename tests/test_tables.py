"""Tests for pytest_mxperf.judge.floors: the published MXNet tables as data, and floor rules.

The figures are checked cell by cell against copies of the MXNet pages (tests/data/mxnet-pages)
with a small markdown-table parser written here, independent of the code that wrote the JSON.
"""

import json
import math
import re
from pathlib import Path

import pytest

from pytest_mxperf.judge import floors as T
from pytest_mxperf.judge import published_tables
from pytest_mxperf.judge.floors import documented_curves, select_floor
from pytest_mxperf.machine.hardware import HardwareInfo
from pytest_mxperf.judge.published_tables import COLUMN_FOR_MODEL, Cell, TableDataError, load_tables

#: copies of the MXNet pages, shipped with the tests (tests/data/mxnet-pages/README.md)
PAGES = Path(__file__).resolve().parent / "data" / "mxnet-pages"
MAIN_PAGE = PAGES / "mxnet-perf-tips-tables.md"
EARLY_PAGE = PAGES / "mxnet-perf-tips-early.md"

C4_CPU = "Intel(R) Xeon(R) CPU E5-2666 v3 @ 2.90GHz"
THIS_CPU = "Intel(R) Xeon(R) Processor"


@pytest.fixture(scope="module")
def tables():
    return load_tables()


@pytest.fixture(scope="module")
def by_id(tables):
    return {t.id: t for t in tables}


def hw_cpu(model, vcpus):
    return HardwareInfo(cpu_model=model, vcpus=vcpus, gpu_names=())


def hw_gpu(*names):
    return HardwareInfo(cpu_model=THIS_CPU, vcpus=8, gpu_names=tuple(names))


# ----------------------------------------------------------------- independent parser


def parse_markdown_tables(text):
    """[(context lines before the table, header cells, {batch: [cell strings]})]."""
    out = []
    lines = text.splitlines()
    context = []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("|") and i + 1 < len(lines) and set(lines[i + 1].strip()) <= set("|- "):
            header = [c.strip() for c in line.split("|")[1:-1]]
            body = {}
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                cells = [c.strip() for c in lines[i].strip().split("|")[1:-1]]
                body[int(cells[0])] = cells[1:]
                i += 1
            out.append((list(context), header, body))
            continue
        if line:
            context.append(line)
        i += 1
    return out


def seed_tables():
    """table id -> (columns, {batch: [strings]}) from the main page seed."""
    result = {}
    for context, header, body in parse_markdown_tables(MAIN_PAGE.read_text()):
        label = context[-1]
        m = re.fullmatch(r"AWS EC2 C4\.(\w+):", label)
        if m:
            tid = f"score/c4.{m.group(1)}"
        else:
            m = re.fullmatch(r"- (K80|M40|P100)\b.*", label)
            assert m, f"unexpected table label {label!r}"
            section = [c for c in context if c.startswith("### ")][-1]
            mode = {"### Scoring results": "score", "### Training results": "train"}[section]
            tid = f"{mode}/{m.group(1).lower()}"
        assert tid not in result, tid
        result[tid] = (header[1:], body)
    return result


def as_expected(text):
    return "OOM" if text == "OOM" else float(text)


def cell_as_seen(cell):
    assert isinstance(cell, Cell)
    if cell.oom:
        assert cell.value is None
        return "OOM"
    return cell.value


# ----------------------------------------------------------------------------- data


def test_table_ids(tables):
    ids = sorted(t.id for t in tables)
    assert ids == sorted(
        [f"score/c4.{s}" for s in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge")]
        + ["score/c4.8xlarge-early"]
        + [f"{m}/{g}" for m in ("score", "train") for g in ("k80", "m40", "p100")]
    )
    assert [t.id for t in tables if t.alternate] == ["score/c4.8xlarge-early"]


def test_342_cells_and_exactly_three_oom(tables):
    main = [t for t in tables if not t.alternate]
    assert len(main) == 11
    total = 0
    oom = []
    for t in main:
        for col in t.columns:
            for b in t.batches:
                c = t.cell(col, b)
                assert c is not None
                total += 1
                if c.oom:
                    oom.append((t.id, col, b))
    assert total == 342 == 8 * 36 + 3 * 18
    assert sorted(oom) == [
        ("score/c4.large", "Resnet 152", 16),
        ("score/c4.large", "Resnet 152", 32),
        ("score/c4.large", "Resnet 50", 32),
    ]
    early = [t for t in tables if t.alternate]
    assert sum(t.n_cells() for t in early) == 36
    assert not any(t.cell(c, b).oom for t in early for c in t.columns for b in t.batches)


def test_every_figure_matches_main_seed_page(by_id):
    seed = seed_tables()
    assert set(seed) == {tid for tid, t in by_id.items() if not t.alternate}
    checked = 0
    for tid, (cols, body) in seed.items():
        t = by_id[tid]
        assert list(t.columns) == [c.replace("\\*", "*") for c in cols]
        assert list(t.batches) == sorted(body)
        for b, cells in body.items():
            for col, text in zip(t.columns, cells):
                assert cell_as_seen(t.cell(col, b)) == as_expected(text), (tid, col, b)
                checked += 1
    assert checked == 342


def test_early_table_matches_early_seed_page(by_id):
    found = parse_markdown_tables(EARLY_PAGE.read_text())
    assert len(found) == 1
    context, header, body = found[0]
    assert any("C4.8xlarge" in c for c in context)
    t = by_id["score/c4.8xlarge-early"]
    assert t.alternate and t.mode == "score"
    assert t.hardware.instance == "c4.8xlarge" and t.hardware.vcpus == 36
    assert list(t.columns) == header[1:]
    assert list(t.batches) == sorted(body)
    for b, cells in body.items():
        for col, text in zip(t.columns, cells):
            assert cell_as_seen(t.cell(col, b)) == as_expected(text), (col, b)
    assert t.cell("Inception-BN", 1).value == 27.43
    assert by_id["score/c4.8xlarge"].cell("Inception-BN", 1).value == 111.36


def test_hardware_facts(by_id):
    vcpus = {"large": 2, "xlarge": 4, "2xlarge": 8, "4xlarge": 16, "8xlarge": 36}
    for size, n in vcpus.items():
        t = by_id[f"score/c4.{size}"]
        assert t.hardware.kind == "cpu"
        assert t.hardware.vcpus == n
        assert "E5-2666 v3" in t.hardware.cpu_model and "2.90GHz" in t.hardware.cpu_model
    for g in ("k80", "m40", "p100"):
        for m in ("score", "train"):
            t = by_id[f"{m}/{g}"]
            assert t.hardware.kind == "gpu" and t.mode == m
            assert t.conditions["commit"] == "0a03417" and t.conditions["cudnn"] == "5.1"
    assert "DGX-1" in by_id["score/p100"].hardware.instance
    assert "single GPU" in by_id["score/k80"].conditions["gpu_note"]


def test_alexnet_batch_multiplier_recorded_both_ways(by_id):
    for g in ("k80", "m40", "p100"):
        t = by_id[f"train/{g}"]
        assert t.columns == ("Alexnet(*8)", "Inception-v3", "Resnet 50")
        assert t.conditions["alexnet_batch_multiplier"] == {"page_header": 8, "benchmark_script": 16}
        assert "16" in t.conditions["alexnet_batch_note"]
        assert t.column_for_model("alexnet") == "Alexnet(*8)"
        assert t.column_for_model("vgg11") is None


def test_json_is_sorted_and_diff_friendly():
    d = published_tables.DEFAULT_DIRECTORY
    files = sorted(d.glob("*.json"))
    assert files
    for f in files:
        text = f.read_text(encoding="utf-8")
        doc = json.loads(text)
        assert doc["schema"] == published_tables.SCHEMA_VERSION
        assert text == json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def test_cell_lookup(by_id):
    t = by_id["score/c4.large"]
    assert t.cell("Resnet 50", 4) == Cell(5.16, False)
    assert t.cell("Resnet 50", 32) == Cell(None, True)
    assert t.cell("Resnet 50", 64) is None
    assert t.cell("NoSuchNet", 1) is None


# ---------------------------------------------------------------------------- loading


def test_corrupt_json_raises_table_data_error_naming_file(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('{"schema": 1, "tables": [', encoding="utf-8")
    with pytest.raises(TableDataError) as ei:
        load_tables(tmp_path)
    msg = str(ei.value)
    assert "broken.json" in msg and "\n" not in msg
    assert isinstance(ei.value, ValueError)


@pytest.mark.parametrize(
    "mutate, expect",
    [
        (lambda d: d.update(schema=99), "schema"),
        (lambda d: d["tables"][0]["rows"]["1"].update(Alexnet="fast"), "Alexnet"),
        (lambda d: d["tables"][0]["rows"]["1"].pop("VGG"), "columns"),
        (lambda d: d["tables"][0].update(mode="infer"), "mode"),
        (lambda d: d["tables"][0].pop("hardware"), "hardware"),
        (lambda d: d["tables"][0]["rows"].update(x={}), "batch"),
        (lambda d: d["tables"].append(dict(d["tables"][0])), "already defined"),
    ],
)
def test_malformed_data_is_reported(tmp_path, mutate, expect):
    src = sorted(published_tables.DEFAULT_DIRECTORY.glob("*.json"))[0]
    doc = json.loads(src.read_text(encoding="utf-8"))
    mutate(doc)
    f = tmp_path / "mutated.json"
    f.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(TableDataError, match=expect) as ei:
        load_tables(tmp_path)
    assert "mutated.json" in str(ei.value)


def test_unreadable_file_and_missing_dir(tmp_path):
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TableDataError, match="bin.json"):
        load_tables(tmp_path)
    with pytest.raises(TableDataError, match="nope"):
        load_tables(tmp_path / "nope")


def test_split_files_load_together(tmp_path):
    src = sorted(published_tables.DEFAULT_DIRECTORY.glob("*.json"))[0]
    doc = json.loads(src.read_text(encoding="utf-8"))
    a, b = dict(doc), dict(doc)
    a["tables"] = doc["tables"][:4]
    b["tables"] = doc["tables"][4:]
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    assert len(load_tables(tmp_path)) == len(doc["tables"])


# ------------------------------------------------------------------------ floor rules


def test_c4_large_like_is_documented_with_tolerance():
    f = select_floor(hw_cpu(C4_CPU, 2), "score", "resnet50_v2", 4, "cpu")
    assert f.kind == "documented"
    assert f.table_id == "score/c4.large"
    assert f.documented == 5.16
    assert f.tolerance == 0.10
    assert math.isclose(f.value, 5.16 * 0.9)
    assert not f.oom_documented
    assert "documented C4.large figure 5.16 img/s less 10% tolerance" in f.reason
    assert "matching hardware" in f.reason and "\n" not in f.reason


def test_tolerance_parameter():
    f = select_floor(hw_cpu(C4_CPU, 2), "score", "alexnet", 1, "cpu", tolerance=0.25)
    assert math.isclose(f.value, 19.86 * 0.75) and "25%" in f.reason
    with pytest.raises(ValueError):
        select_floor(hw_cpu(C4_CPU, 2), "score", "alexnet", 1, "cpu", tolerance=1.5)


def test_this_machine_2_vcpus_is_legacy_sanity_from_c4_large():
    f = select_floor(hw_cpu(THIS_CPU, 2), "score", "resnet50_v2", 4, "cpu")
    assert f.kind == "legacy-sanity"
    assert f.table_id == "score/c4.large"
    assert f.documented == 5.16 and math.isclose(f.value, 4.644)
    assert "legacy sanity floor" in f.reason
    assert "2-vCPU CPU must not be slower than C4.large" in f.reason
    assert "catastrophes" in f.reason


def test_3_vcpus_uses_c4_large_and_says_why():
    f = select_floor(hw_cpu(THIS_CPU, 3), "score", "inception-v3", 8, "cpu")
    assert f.kind == "legacy-sanity" and f.table_id == "score/c4.large"
    assert f.documented == 4.66
    assert "3-vCPU" in f.reason and "C4.large" in f.reason and "largest C4" in f.reason


@pytest.mark.parametrize(
    "vcpus, table_id", [(4, "score/c4.xlarge"), (7, "score/c4.xlarge"), (8, "score/c4.2xlarge"),
                        (16, "score/c4.4xlarge"), (35, "score/c4.4xlarge"), (96, "score/c4.8xlarge")]
)
def test_legacy_cpu_sizes(vcpus, table_id):
    f = select_floor(hw_cpu(THIS_CPU, vcpus), "score", "vgg11", 2, "cpu")
    assert f.kind == "legacy-sanity"
    assert f.table_id.startswith(table_id)


def test_e5_2666_with_odd_vcpu_count_is_not_matching():
    f = select_floor(hw_cpu(C4_CPU, 6), "score", "vgg11", 2, "cpu")
    assert f.kind == "legacy-sanity" and f.table_id == "score/c4.xlarge"


def test_1_vcpu_has_no_floor():
    f = select_floor(hw_cpu(THIS_CPU, 1), "score", "resnet50_v2", 4, "cpu")
    assert f.kind is None and f.value is None and f.reason


def test_c4_8xlarge_holds_to_lower_of_main_and_early(by_id):
    main, early = by_id["score/c4.8xlarge"], by_id["score/c4.8xlarge-early"]
    for model, col in COLUMN_FOR_MODEL.items():
        for b in main.batches:
            f = select_floor(hw_cpu(C4_CPU, 36), "score", model, b, "cpu")
            lo = min(main.cell(col, b).value, early.cell(col, b).value)
            assert f.kind == "documented"
            assert f.documented == lo
            assert f.table_id == (main.id if main.cell(col, b).value == lo else early.id)
            assert "lower of" in f.reason
    f = select_floor(hw_cpu(C4_CPU, 36), "score", "inception-bn", 1, "cpu")
    assert f.documented == 27.43 and f.table_id == "score/c4.8xlarge-early"
    f = select_floor(hw_cpu(C4_CPU, 36), "score", "resnet50_v2", 32, "cpu")
    assert f.documented == 55.70 and f.table_id == "score/c4.8xlarge-early"


def test_legacy_36_vcpus_also_holds_to_lower():
    f = select_floor(hw_cpu(THIS_CPU, 64), "score", "inception-bn", 1, "cpu")
    assert f.kind == "legacy-sanity" and f.documented == 27.43


def test_k80_is_documented():
    f = select_floor(hw_gpu("Tesla K80"), "score", "alexnet", 32, "gpu")
    assert f.kind == "documented" and f.table_id == "score/k80"
    assert f.documented == 1443.90 and math.isclose(f.value, 1443.90 * 0.9)
    f = select_floor(hw_gpu("Tesla K80", "Tesla K80"), "train", "resnet50_v2", 8, "gpu")
    assert f.kind == "documented" and f.table_id == "train/k80" and f.documented == 36.83


@pytest.mark.parametrize(
    "name, table", [("Tesla M40 24GB", "m40"), ("Tesla P100-SXM2-16GB", "p100"), ("Tesla P100-PCIE-16GB", "p100")]
)
def test_other_documented_gpus(name, table):
    f = select_floor(hw_gpu(name), "score", "resnet152_v2", 16, "gpu")
    assert f.kind == "documented" and f.table_id == f"score/{table}"


@pytest.mark.parametrize("name", ["NVIDIA A100-SXM4-40GB", "Tesla V100-SXM2-16GB", "NVIDIA H100 80GB HBM3"])
def test_known_faster_gpu_is_legacy_p100(name):
    f = select_floor(hw_gpu(name), "score", "resnet50_v2", 32, "gpu")
    assert f.kind == "legacy-sanity" and f.table_id == "score/p100"
    assert f.documented == 713.17
    assert "P100" in f.reason


@pytest.mark.parametrize(
    "name",
    ["Tesla T4", "NVIDIA A100-SXM4-40GB MIG 1g.5gb", "Tesla K40m", "Quadro P1000",
     "Quadro M4000", "NVIDIA L4", "Some Future GPU"],
)
def test_gpus_without_floor(name):
    f = select_floor(hw_gpu(name), "score", "resnet50_v2", 32, "gpu")
    assert f.kind is None and f.value is None and f.table_id is None and f.reason


def test_faster_than_p100_is_a_named_constant():
    for g in ("V100", "A100", "H100", "H200"):
        assert g in T.GPUS_FASTER_THAN_P100
    for g in ("T4", "K40", "P100"):
        assert g not in T.GPUS_FASTER_THAN_P100


def test_no_gpu_or_mixed_gpus():
    assert select_floor(hw_gpu(), "score", "alexnet", 1, "gpu").kind is None
    f = select_floor(hw_gpu("Tesla P100-SXM2-16GB", "Tesla T4"), "score", "alexnet", 1, "gpu")
    assert f.kind is None and "mixed" in f.reason


def test_cpu_training_has_no_floor():
    for cpu in (C4_CPU, THIS_CPU):
        f = select_floor(hw_cpu(cpu, 2), "train", "resnet50_v2", 4, "cpu")
        assert f.kind is None and f.value is None
        assert "no published table for CPU training" in f.reason


@pytest.mark.parametrize("model, batch", [("resnet152_v2", 16), ("resnet152_v2", 32), ("resnet50_v2", 32)])
def test_oom_cells_are_oom_documented(model, batch):
    for cpu, kind in ((C4_CPU, "documented"), (THIS_CPU, "legacy-sanity")):
        f = select_floor(hw_cpu(cpu, 2), "score", model, batch, "cpu")
        assert f.kind == kind
        assert f.oom_documented is True
        assert f.value is None and f.documented is None
        assert f.table_id == "score/c4.large"
        assert "OOM" in f.reason


def test_unknown_model_or_batch_is_none_not_exception():
    f = select_floor(hw_cpu(C4_CPU, 2), "score", "mobilenet", 4, "cpu")
    assert f.kind is None and "mobilenet" in f.reason
    f = select_floor(hw_cpu(C4_CPU, 2), "score", "alexnet", 64, "cpu")
    assert f.kind is None and "64" in f.reason
    f = select_floor(hw_gpu("Tesla P100-SXM2-16GB"), "train", "vgg11", 8, "gpu")
    assert f.kind is None and "vgg11" in f.reason


def test_bad_mode_or_device_raises():
    with pytest.raises(ValueError):
        select_floor(hw_cpu(C4_CPU, 2), "inference", "alexnet", 1, "cpu")
    with pytest.raises(ValueError):
        select_floor(hw_cpu(C4_CPU, 2), "score", "alexnet", 1, "tpu")


def test_training_alexnet_multiplier_ambiguity():
    p100 = hw_gpu("Tesla P100-SXM2-16GB")
    # real batch 16: row 2 under x8, row 1 under x16 -> the lower figure (row 1)
    f = select_floor(p100, "train", "alexnet", 16, "gpu")
    assert f.kind == "documented" and f.documented == 809.94
    assert "x8" in f.reason and "x16" in f.reason
    # real batch 256: row 32 (x8) = 1869.69, row 16 (x16) = 2012.04 -> 1869.69
    f = select_floor(p100, "train", "alexnet", 256, "gpu")
    assert f.documented == 1869.69
    # real batch 8 or 512: only one reading has a row -> no floor, said so
    for b in (8, 512, 1):
        f = select_floor(p100, "train", "alexnet", b, "gpu")
        assert f.kind is None and "x16" in f.reason


def test_explicit_tables_argument(tmp_path):
    only_gpu = [t for t in load_tables() if t.hardware.kind == "gpu"]
    f = select_floor(hw_cpu(C4_CPU, 2), "score", "alexnet", 1, "cpu", tables=only_gpu)
    assert f.kind is None


def test_documented_curves(by_id):
    curves = documented_curves("resnet152_v2", "score")
    assert "score/c4.large" in curves and "score/c4.8xlarge-early" in curves
    assert curves["score/c4.large"] == {1: 1.97, 2: 1.98, 4: 2.00, 8: 1.99, 16: None, 32: None}
    assert len(curves) == 9
    train = documented_curves("alexnet", "train")
    assert sorted(train) == ["train/k80", "train/m40", "train/p100"]
    assert train["train/k80"][1] == 230.69
    assert documented_curves("vgg11", "train") == {}
    with pytest.raises(ValueError):
        documented_curves("alexnet", "bogus")


def test_module_does_not_import_mxnet_or_pytest():
    src = Path(T.__file__).read_text(encoding="utf-8")
    assert not re.search(r"^\s*(import|from)\s+(mxnet|pytest)\b", src, re.M)
