"""tf.Transform treatments of dates, timestamps and free text (TensorFlow ops only).

They run inside the transform graph, so the serving signature, which applies
that graph to raw tf.Examples, takes the raw string as the CSV holds it.

date / timestamp: the text (or, `unix_seconds`, the number) is parsed into
  year, month, day of week (Monday 0), day of year and days since 1970-01-01
  (a timestamp adds the hour, and its days count the time of day), each
  z-scored over the values present; `<name>_xf` is the vector of these parts
  and `<name>_missing` is 1 where the cell is blank or does not parse (its
  parts are then 0, the mean). ISO times with a zone count days from the UTC
  instant; the parts are those of the clock time written.
text: lower-cased words (letters and digits) -> ids of a vocabulary of the
  `top_k` most frequent words of the training data (unknown words share OOV
  ids), the first `max_tokens` of them, padded with -1: `<name>_xf` is
  [batch, max_tokens] int64, which the model embeds and averages.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_transform as tft

DATE_PARTS = ("year", "month", "day_of_week", "day_of_year", "days_since_1970")
TIMESTAMP_PARTS = ("year", "month", "day_of_week", "day_of_year", "hour", "days_since_1970")

# ISO 8601: date, optional time (T or space) with optional seconds and fraction, optional zone.
_ISO = (
    r"^\s*([0-9]{4})-([0-9]{2})-([0-9]{2})"
    r"(?:[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:[.,][0-9]+)?)?)?"
    r"\s*(?:Z|([+-])([0-9]{2}):?([0-9]{2}))?\s*$"
)
# d/m/yyyy or m/d/yyyy (/, - or . between), an optional h:mm[:ss] after a space.
_DAY_MONTH = (
    r"^\s*([0-9]{1,2})[/.-]([0-9]{1,2})[/.-]([0-9]{4})"
    r"(?:\s+([0-9]{1,2}):([0-9]{2})(?::([0-9]{2}))?)?\s*$"
)
SECONDS_PER_DAY = 86400


def parts_of(treatment: str) -> tuple[str, ...]:
    return TIMESTAMP_PARTS if treatment == "timestamp" else DATE_PARTS


def _group(text: tf.Tensor, pattern: str, n: int) -> tf.Tensor:
    """Group `n` of `pattern` in each (matching) string as int64; an empty group is 0."""
    digits = tf.strings.regex_replace(text, pattern, "0\\" + str(n))
    return tf.strings.to_number(digits, tf.int64)


def days_from_civil(y: tf.Tensor, m: tf.Tensor, d: tf.Tensor) -> tf.Tensor:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    y = y - tf.cast(m <= 2, tf.int64)
    era = tf.math.floordiv(y, 400)
    yoe = y - era * 400
    mp = tf.where(m > 2, m - 3, m + 9)
    doy = (153 * mp + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(days: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(year, month, day) of days since 1970-01-01."""
    z = days + 719468
    era = tf.math.floordiv(z, 146097)
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = tf.where(mp < 10, mp + 3, mp - 9)
    return yoe + era * 400 + tf.cast(m <= 2, tf.int64), m, d


def _parse_text(text: tf.Tensor, fmt: str) -> tuple[tf.Tensor, ...]:
    """(days since 1970 of the date written, seconds from its start to the UTC instant,
    the hour written, valid) of strings."""
    pattern = _ISO if fmt == "iso" else _DAY_MONTH
    matches = tf.strings.regex_full_match(text, pattern)
    # Rows that do not match get a valid stand-in, so to_number never sees text.
    safe = tf.where(matches, text, "1970-01-01" if fmt == "iso" else "01/01/1970")
    if fmt == "iso":
        y, m, d = (_group(safe, pattern, i) for i in (1, 2, 3))
    elif fmt == "dmy":
        d, m, y = (_group(safe, pattern, i) for i in (1, 2, 3))
    else:
        m, d, y = (_group(safe, pattern, i) for i in (1, 2, 3))
    hour, minute, second = (_group(safe, pattern, i) for i in (4, 5, 6))
    days = days_from_civil(y, m, d)
    # A date that does not exist (31/02) comes back as another one: invalid.
    y2, m2, d2 = civil_from_days(days)
    valid = matches & tf.equal(y, y2) & tf.equal(m, m2) & tf.equal(d, d2)
    valid &= (hour < 24) & (minute < 60) & (second < 61)
    seconds = hour * 3600 + minute * 60 + second
    if fmt == "iso":
        sign = tf.where(tf.strings.regex_replace(safe, pattern, "\\7") == "-", -1, 1)
        offset = tf.cast(sign, tf.int64) * (
            _group(safe, pattern, 8) * 60 + _group(safe, pattern, 9)
        )
        # The instant in UTC: days and seconds shift by the zone's offset.
        seconds = seconds - offset * 60
    return days, seconds, hour, valid


def _parse_unix(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    if x.dtype == tf.string:
        valid = tf.strings.regex_full_match(x, r"^\s*[+-]?[0-9]+(\.[0-9]*)?\s*$")
        x = tf.strings.to_number(tf.where(valid, x, "0"), tf.float64)
    else:
        x = tf.cast(x, tf.float64)
        valid = tf.math.is_finite(x)
        x = tf.where(valid, x, 0.0)
    total = tf.cast(tf.math.floor(x), tf.int64)
    return tf.math.floordiv(total, SECONDS_PER_DAY), tf.math.floormod(total, SECONDS_PER_DAY), valid


def date_parts(x: tf.Tensor, treatment: str, fmt: str) -> tuple[tf.Tensor, tf.Tensor]:
    """([batch, parts] float32 of the raw column `x` ([batch]), [batch] bool: parsed)."""
    if fmt == "unix_seconds":
        days, seconds, valid = _parse_unix(x)
        local_days, hour = days, seconds // 3600
    else:
        text = x if x.dtype == tf.string else tf.strings.as_string(x)
        local_days, seconds, hour, valid = _parse_text(text, fmt)
        days = local_days + tf.math.floordiv(seconds, SECONDS_PER_DAY)
        seconds = tf.math.floormod(seconds, SECONDS_PER_DAY)
    y, m, _ = civil_from_days(local_days)
    values = {
        "year": y,
        "month": m,
        "day_of_week": tf.math.floormod(local_days + 3, 7),
        "day_of_year": local_days - days_from_civil(y, tf.ones_like(y), tf.ones_like(y)) + 1,
        "hour": hour,
    }
    parts = [tf.cast(values[p], tf.float32) for p in parts_of(treatment)[:-1]]
    since = tf.cast(days, tf.float64)
    if treatment == "timestamp":
        since += tf.cast(seconds, tf.float64) / SECONDS_PER_DAY
    parts.append(tf.cast(since, tf.float32))
    return tf.stack(parts, axis=1), valid


def _present_only(values: tf.Tensor, valid: tf.Tensor) -> tf.SparseTensor:
    """[batch] values as a [batch, 1] SparseTensor holding only the valid rows."""
    rows = tf.where(valid)
    indices = tf.concat([rows, tf.zeros_like(rows)], axis=1)
    shape = tf.stack([tf.shape(values, out_type=tf.int64)[0], tf.constant(1, tf.int64)])
    return tf.SparseTensor(indices, tf.gather_nd(values, rows), shape)


def transform_date(
    x: tf.Tensor, treatment: str, fmt: str, default: str | int
) -> tuple[tf.Tensor, tf.Tensor]:
    """(`<name>_xf` [batch, parts] z-scored over parsed values, `<name>_missing` [batch])."""
    present = None
    if isinstance(x, tf.SparseTensor):
        ones = tf.SparseTensor(x.indices, tf.ones_like(x.values, tf.bool), x.dense_shape)
        present = tf.squeeze(tf.sparse.to_dense(ones, False), axis=1)
        x = tf.squeeze(tf.sparse.to_dense(x, default), axis=1)
    parts, valid = date_parts(x, treatment, fmt)
    if present is not None:  # a blank number would read as 1970-01-01
        valid &= present
    scaled = []
    for i in range(len(parts_of(treatment))):
        z = tft.scale_to_z_score(_present_only(parts[:, i], valid))
        scaled.append(tf.squeeze(tf.sparse.to_dense(z, 0.0), axis=1))
    return tf.stack(scaled, axis=1), 1.0 - tf.cast(valid, tf.float32)


def tokens(text: tf.Tensor) -> tf.RaggedTensor:
    """Lower-cased words of each string: runs of letters and digits."""
    words = tf.strings.regex_replace(tf.strings.lower(text), r"[^\pL\pN]+", " ")
    return tf.strings.split(tf.strings.strip(words))


def transform_text(x, name: str, top_k: int, oov_buckets: int, max_tokens: int) -> tf.Tensor:
    """[batch, max_tokens] int64 word ids (vocabulary `name`), -1 past the last word."""
    if isinstance(x, tf.SparseTensor):
        x = tf.squeeze(tf.sparse.to_dense(x, ""), axis=1)
    ids = tft.compute_and_apply_vocabulary(
        tokens(x), top_k=top_k, num_oov_buckets=oov_buckets, vocab_filename=name
    )
    return ids.to_tensor(default_value=-1, shape=[None, max_tokens])
