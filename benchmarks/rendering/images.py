"""Images at scale: ingest, training input (files against shards), input against compute."""

from __future__ import annotations

from .tables import _num, _table

_INGEST_SIDES = {
    "ours": "ImageExampleGen (decode check, split, encoded bytes, GZIP shards, metadata)",
    "seed": "the TFRecord recipe's writer (PIL decode, raw pixels, one file, no split)",
    "import": "ImportExampleGen over the recipe's file (split, GZIP shards)",
}
_READ_SIDES = {
    "files_default": "files: image_dataset_from_directory, bare",
    "files_tuned": "files: image_dataset_from_directory, tuned",
    "shards": "shards: input_fn (ours)",
    "files_tuned_cold": "files: tuned",
    "shards_cold": "shards: input_fn (ours)",
    "shards_window256": "shards: input_fn, 256-record shuffle window",
}


def _disk_line(disk: dict | None) -> str:
    if not disk:
        return ""
    return (
        f" Disk alone (cold, one thread, nothing decoded, {disk['mb']:,.0f} MB): files "
        f"{disk['files_mb_per_s']:,.0f} MB/s, shards {disk['shards_mb_per_s']:,.0f} MB/s, "
        f"{disk['ratio']:.2f}x."
    )


def render_image_scale(result: dict) -> list[str]:
    ingest, read, v = result["ingest"], result["read"], result["input_vs_compute"]
    rows = [
        [
            _INGEST_SIDES[name],
            _num(r["seconds"]),
            _num(r["images_per_s"], 0),
            _num(r["input_mb_per_s"]),
            _num(r["output_mb"], 0),
            _num(r["output_files"], 0),
            _num(r["peak_rss_mb"], 0),
        ]
        for name in _INGEST_SIDES
        if (r := ingest.get(name))
    ]
    reads = [
        [
            _READ_SIDES[name],
            r["page_cache"],
            _num(r["images_per_s"], 0),
            _num(r["first_batch_seconds"], 2),
            _num(r["peak_rss_mb"], 0),
            _num(r["bytes_mb"], 0),
        ]
        for name in _READ_SIDES
        if (r := read.get(name))
    ]
    steps = [
        [m, _num(r["seconds_per_step"], 2), _num(r["images_per_s"]), v["bound_by"][m]]
        for m, r in result["compute"].items()
    ]
    g = v["gpu_reference"]
    both = ingest.get("ours_vs_seed_plus_import")
    return [
        f"{result['images']:,} images ({result['dataset']}, ~{result['size']}x{result['size']}, "
        f"{ingest['input_mb']:,.0f} MB), {result['classes']} classes, {result['cores']} cores.",
        "",
        *_table(["ingest", "s", "images/s", "MB/s in", "MB out", "files", "peak RSS MB"], rows),
        "",
        f"Ours / the recipe's writer: {_num(ingest['ours_vs_seed_writer'], 2)}x the speed"
        + (f"; / the recipe's writer + ImportExampleGen: {_num(both, 2)}x." if both else "."),
        "",
        *_table(
            [
                "training input",
                "page cache",
                "images/s",
                "first batch s",
                "peak RSS MB",
                "MB on disk",
            ],
            reads,
        ),  # fmt: skip
        "",
        f"**shards vs files: throughput {read['throughput_ratio']:.2f}x, peak memory "
        f"{read['peak_memory_ratio']:.2f}x** (warm page cache; {read['images_timed']:,} images "
        f"per pass, batch {read['batch']}); cold: throughput "
        f"{read['cold_throughput_ratio']:.2f}x, peak memory {read['cold_peak_memory_ratio']:.2f}x."
        + _disk_line(read.get("disk")),
        "",
        *_table(["training step on this CPU", "s/step", "images/s", "bounded by"], steps),
        "",
        f"Input here: {v['input_images_per_s']:,.0f} images/s. A GPU at {g['images_per_s']:,} "
        f"images/s ([{g['what']}]({g['source']})) needs {v['gpu_needs_x_input']}x that.",
    ]
