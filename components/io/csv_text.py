"""Opening a CSV file's bytes the way every reader in this project must.

Files arrive as spreadsheets and other tools write them: with a UTF-8
byte-order mark ("CSV UTF-8"), in another encoding, gzip-compressed under a
`.csv` name. Every reader of raw CSV (the Arrow ingest, TFX's reader path, the
CSV checks, the pre-run span checks, `tfxp data add`, `tfxp predict`, the
gate's serving data) opens files through this module, so they all agree:

- a UTF-8 byte-order mark is not part of the first column's name (it is
  skipped, for UTF-8 datasets; in a dataset of another encoding it is an error,
  because the file is then most likely not in that encoding);
- text must be valid in the dataset's encoding (UTF-8 unless the dataset says
  otherwise); an invalid byte is reported with file, line, column and byte
  offset;
- compressed bytes (gzip, bzip2, xz, zstd, zip), whatever the file's name, are
  refused with the file named and what to do: ExampleGen reads plain CSV
  (TFX's CsvExampleGen cannot read compressed spans either, and the Arrow
  ingest reads byte ranges of files).

Only encodings in which newline, carriage return, comma and double quote are
the ASCII bytes (UTF-8, Latin-1, Windows-1252, ...) are accepted: the Arrow
ingest cuts files into byte ranges at newline bytes.
"""

from __future__ import annotations

import codecs
import csv
from collections.abc import Iterator
from dataclasses import dataclass, field

DEFAULT_ENCODING = "utf-8"
UTF8_BOM = codecs.BOM_UTF8
# Leading bytes of compressed formats people send instead of CSV.
_COMPRESSED = (
    (b"\x1f\x8b", "gzip", "gunzip -c {path} > {plain}"),
    (b"BZh", "bzip2", "bunzip2 -c {path} > {plain}"),  # + block size digit + 1AY&SY
    (b"\xfd7zXZ\x00", "xz", "xz -dc {path} > {plain}"),
    (b"\x28\xb5\x2f\xfd", "zstd", "zstd -dc {path} -o {plain}"),
    (b"PK\x03\x04", "zip", "unzip -p {path} > {plain}"),
)
_SNIFF_BYTES = 10


class CsvTextError(ValueError):
    """A CSV file's bytes cannot be read as text; the message names the file and what to do."""

    def __init__(
        self, detail: str, path: str | None = None, line: int | None = None, column=None
    ) -> None:
        self.detail, self.path, self.line, self.column = detail, path, line, column
        where = "" if path is None else path if line is None else f"{path}:{line}"
        if column is not None and path is not None:
            where += f" field {column + 1}" if isinstance(column, int) else f" column {column!r}"
        super().__init__(f"{where}: {detail}" if where else detail)


def check_encoding(encoding: str) -> str:
    """The codec's canonical name, or CsvTextError if it is unknown or not ASCII-compatible."""
    try:
        info = codecs.lookup(encoding)
    except LookupError as e:
        raise CsvTextError(f"unknown text encoding {encoding!r} (e.g. utf-8, latin-1)") from e
    probe = '\n\r,"az09.-'
    try:
        compatible = probe.encode(info.name) == probe.encode("ascii")
    except UnicodeError:
        compatible = False
    if not compatible or info.name in ("utf-7",):
        raise CsvTextError(
            f"text encoding {encoding!r} is not supported: its newlines, commas and quotes are "
            "not single ASCII bytes; convert the files to UTF-8 "
            f"(iconv -f {encoding} -t utf-8 FILE > FILE.utf8.csv)"
        )
    return info.name


def is_utf8(encoding: str) -> bool:
    return codecs.lookup(encoding).name in ("utf-8", "utf-8-sig")


def compression_of(head: bytes) -> tuple[str, str] | None:
    """(format, command template) when `head` starts like a compressed file."""
    for magic, name, command in _COMPRESSED:
        if head.startswith(magic):
            # "BZh" alone could begin a header ("BZhours,..."): bzip2 is BZh<1-9>1AY&SY.
            if name == "bzip2" and not (head[3:4].isdigit() and head[4:10] == b"1AY&SY"):
                continue
            return name, command
    return None


def _open(path: str):
    # GFile reads local paths and remote URIs (s3://, gs://) alike.
    import tensorflow as tf

    return tf.io.gfile.GFile(path, "rb")


def compressed_message(path: str, head: bytes) -> str | None:
    """Why `path` (starting with `head`) is not plain CSV, or None."""
    found = compression_of(head)
    if found is None:
        return None
    name, command = found
    file = path.rsplit("/", 1)[-1]
    plain = file
    for suffix in (".gz", ".bz2", ".xz", ".zst", ".zip"):
        plain = plain.removesuffix(suffix)
    if plain != file and plain.endswith(".csv"):
        todo = f"{command.format(path=file, plain=plain)} && rm {file}"
    else:  # compressed bytes under a plain name
        stem = file.removesuffix(".csv")
        todo = f"{command.format(path=file, plain=stem + '.plain')} && mv {stem}.plain {file}"
    return (
        f"the file is {name}-compressed (its bytes start with "
        f"{' '.join(f'{b:02x}' for b in head[:2])}), not CSV text; ExampleGen reads plain CSV "
        f"only. Decompress it in place, e.g. "
        f"`{todo}`"
    )


def sniff(path: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Bytes to skip at the start of `path` (a UTF-8 byte-order mark), or CsvTextError.

    Raises for compressed bytes, and for a UTF-8 byte-order mark in a file of
    a dataset whose encoding is not UTF-8.
    """
    with _open(path) as f:
        head = f.read(_SNIFF_BYTES)
    message = compressed_message(path, head)
    if message:
        raise CsvTextError(message, path)
    if head.startswith(UTF8_BOM):
        if is_utf8(encoding):
            return len(UTF8_BOM)
        raise CsvTextError(
            f"the file starts with a UTF-8 byte-order mark, but the dataset's encoding "
            f"is {encoding}; save it as {encoding}, or set the dataset's encoding to utf-8",
            path,
        )
    return 0


def decode_error(path: str, line: int, line_offset: int, raw: bytes, encoding: str) -> CsvTextError:
    """The error for invalid bytes in physical line `line` (bytes `raw`, at `line_offset`)."""
    try:
        raw.decode(encoding)
        return CsvTextError(f"text is not valid {encoding}", path, line)
    except UnicodeDecodeError as e:
        start, end = e.start, e.end
    text = raw.decode(encoding, errors="surrogateescape")
    column = None
    try:
        row = next(csv.reader([text]))
        column = next((i for i, cell in enumerate(row) if has_escapes(cell)), None)
    except (csv.Error, StopIteration):
        pass
    return invalid_bytes(path, line, column, line_offset + start, raw[start:end], encoding)


def invalid_bytes(
    path: str, line: int, column: int | str | None, offset: int, bad: bytes, encoding: str
) -> CsvTextError:
    """The error for bytes `bad` (not valid `encoding`) at byte `offset` of `path`."""
    bad = bad[:4]
    shown = ("byte " if len(bad) == 1 else "bytes ") + " ".join(f"{b:02x}" for b in bad)
    name = "UTF-8" if is_utf8(encoding) else encoding
    hint = ", or declare the dataset's encoding (its config's csv_encoding, e.g. 'latin-1')"
    return CsvTextError(
        f"not valid {name} text: {shown} at byte offset {offset} of the file; "
        f"save the file as {name}" + (hint if is_utf8(encoding) else ""),
        path,
        line,
        column,
    )


@dataclass
class TextLines:
    """The decoded physical lines of a CSV file, its byte-order mark removed.

    Iterating yields text lines (line endings kept, for csv.reader). Bytes not
    valid in `encoding` are decoded with surrogate escapes (U+DC80..U+DCFF)
    and remembered in `invalid` (physical line number -> (byte offset of the
    first invalid byte in the file, the bytes from there)), so a reader can
    name the column they fall in. `strict=True` raises CsvTextError instead.
    """

    path: str
    encoding: str = DEFAULT_ENCODING
    strict: bool = False
    invalid: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    bom: int = 0

    def __iter__(self) -> Iterator[str]:
        self.bom = sniff(self.path, self.encoding)
        encoding = self.encoding
        with _open(self.path) as f:
            if self.bom:
                f.read(self.bom)
            offset, number = self.bom, 0
            while raw := f.readline():
                number += 1
                try:
                    text = raw.decode(encoding)
                except UnicodeDecodeError as e:
                    self.invalid[number] = (offset + e.start, raw[e.start : e.end])
                    if self.strict:
                        raise decode_error(self.path, number, offset, raw, encoding) from e
                    text = raw.decode(encoding, errors="surrogateescape")
                yield text
                offset += len(raw)

    def invalid_between(self, first: int, last: int) -> tuple[int, int, bytes] | None:
        """(line, byte offset, bytes) of the first invalid bytes in physical lines first..last."""
        for line in range(first, last + 1):
            if line in self.invalid:
                return (line, *self.invalid[line])
        return None


def has_escapes(cell: str) -> bool:
    """Whether a cell decoded by TextLines holds bytes that were not valid text."""
    return any("\udc80" <= ch <= "\udcff" for ch in cell)


def read_header(path: str, encoding: str = DEFAULT_ENCODING) -> list[str]:
    """The column names of `path`'s header line (byte-order mark removed), or CsvTextError."""
    lines = TextLines(path, encoding, strict=True)
    for line in lines:
        try:
            return next(csv.reader([line]), [])
        except csv.Error as e:
            raise CsvTextError(f"unreadable header: {e}", path, 1) from e
    return []


def transcode(block: bytes, encoding: str) -> bytes:
    """`block` as UTF-8 (what pyarrow parses); UnicodeDecodeError if not valid `encoding`."""
    if is_utf8(encoding):
        return block
    return block.decode(encoding).encode("utf-8")
