"""The image files of a span, listed as a stream: class folders first, then each folder's files.

A span of image class folders can hold a million files. Nothing here holds
them all: the pattern's folder part (`span-1/*`) is expanded to the class
folders (a handful of names), and each folder's files are read from an
`os.scandir` iterator, one open directory handle at a time, inside the Beam
pipeline that ingests them (`ListFolder`). Object-store folders (s3://,
gs://) are listed through TFX's fileio, a page of names at a time.

Operating-system files are not data and not errors: `.DS_Store`,
`Thumbs.db`, `desktop.ini`, AppleDouble `._*` files and any other hidden
(dot) file are left out and counted as "ignored", never "bad".
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator

import apache_beam as beam
from tfx.dsl.io import fileio

# Files an OS or a file manager leaves in folders; with every dot-file, not images.
OS_FILES = frozenset({"Thumbs.db", "ehthumbs.db", "desktop.ini", "Desktop.ini", "Icon\r"})
IGNORED = "ignored"  # ListFolder's tagged output of non-data files
_GLOB_CHARS = set("*?[")


class ImageInputError(ValueError):
    """The image folders cannot be ingested as configured; the message says where and why."""


def is_not_data(name: str) -> bool:
    """A name no image folder means as data: a hidden file or an OS's metadata file."""
    return name.startswith(".") or name in OS_FILES


def _is_remote(path: str) -> bool:
    return "://" in path


def _entries(folder: str) -> Iterator[tuple[str, bool, int]]:
    """(name, is a folder, size in bytes) of each entry, streamed (never the whole listing)."""
    if _is_remote(folder):
        for name in fileio.listdir(folder):
            path = os.path.join(folder, name.rstrip("/"))
            is_dir = fileio.isdir(path)
            yield name.rstrip("/"), is_dir, 0 if is_dir else fileio.stat(path).length
        return
    with os.scandir(folder) as it:
        for e in it:
            is_dir = e.is_dir()
            yield e.name, is_dir, 0 if is_dir else e.stat().st_size


def class_folders(
    base: str, pattern: str, class_names: list[str]
) -> tuple[list[tuple[str, int]], list[str]]:
    """((folder, label) of every folder the pattern's folder part matches, sorted; the
    OS files met on the way, e.g. `span-1/.DS_Store`, to count as ignored).

    `pattern` is ExampleGen's resolved split pattern relative to `base`, e.g.
    `span-1/*/*`: the last part matches files, the part before it names the
    class folders. A matched folder that is no class but holds files fails
    here, with its path, before any image is read.
    """
    *folder_parts, _ = pattern.split("/")
    folders, ignored = [base.rstrip("/")], []
    for part in folder_parts:
        if not set(part) & _GLOB_CHARS:
            folders = [
                os.path.join(f, part) for f in folders if fileio.isdir(os.path.join(f, part))
            ]
            continue
        matched = []
        for f in folders:
            for name, is_dir, _ in _entries(f):
                if is_not_data(name):
                    if not is_dir and fnmatch.fnmatchcase(name, part):
                        ignored.append(os.path.join(f, name))
                elif is_dir and fnmatch.fnmatchcase(name, part):
                    matched.append(os.path.join(f, name))
        folders = matched
    found = []
    for folder in sorted(folders):
        name = os.path.basename(folder)
        if name in class_names:
            found.append((folder, class_names.index(name)))
        elif any(not is_dir and not is_not_data(n) for n, is_dir, _ in _entries(folder)):
            raise ImageInputError(
                f"{folder}: folder {name!r} is not a class of this dataset "
                f"(classes: {', '.join(class_names)}); images go in "
                f"{base}/span-<N>/<class>/, or add the class to the dataset config"
            )
    return found, sorted(ignored)


def folder_files(folder: str, file_pattern: str = "*") -> Iterator[tuple[str, int, bool]]:
    """(path, size, is data) of the folder's files matching `file_pattern`, streamed."""
    for name, is_dir, size in _entries(folder):
        if not is_dir and fnmatch.fnmatchcase(name, file_pattern):
            yield os.path.join(folder, name), size, not is_not_data(name)


def first_image_files(folders: list[tuple[str, int]], n: int = 8) -> list[str]:
    """Up to `n` data files from the first folders, to estimate record sizes from."""
    found: list[str] = []
    for folder, _ in folders:
        for path, _, is_data in folder_files(folder):
            if is_data:
                found.append(path)
                if len(found) >= n:
                    return found
    return found


class ListFolder(beam.DoFn):
    """(folder, label) -> (path, label, bytes) per image file; non-data files to IGNORED.

    Runs inside the Beam pipeline: the listing streams into the shards' group
    by key, and no step before it holds every path.
    """

    def __init__(self, file_pattern: str):
        self._pattern = file_pattern

    def process(self, element):
        folder, label = element
        for path, size, is_data in folder_files(folder, self._pattern):
            if is_data:
                yield path, label, size
            else:
                yield beam.pvalue.TaggedOutput(IGNORED, path)
