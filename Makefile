# Every target sets up .venv first (fast and idempotent when nothing changed).
PY := .venv/bin/python
export TF_CPP_MIN_LOG_LEVEL ?= 3

.PHONY: setup run test test-fast lint docs screenshots bench lock clean

setup:
	@scripts/setup.sh

## The main job: the whole pipeline on the embedded Chicago taxi data.
run: setup
	$(PY) local_runner.py $(ARGS)

# pytest-xdist over every core (at most 4: each worker may hold a TensorFlow pipeline).
# loadgroup keeps the tests of a shared module/session fixture on one worker
# (tests/conftest.py groups them), so each expensive run happens once.
XDIST := -n auto --maxprocesses=4 --dist loadgroup --no-loadscope-reorder

## Every test, end-to-end included (what CI runs).
test: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	.venv/bin/lint-imports
	$(MYPY)
	$(MKDOCS)
	$(PY) -m pytest $(XDIST) --durations=30 $(ARGS)

## Unit tests only (seconds to a few minutes).
test-fast: setup
	$(PY) -m pytest $(XDIST) -m "not slow" $(ARGS)

lint: setup
	$(PY) -m ruff check . && $(PY) -m ruff format --check . && .venv/bin/lint-imports && $(MYPY) \
	  && $(MKDOCS)

# The type checker over the production packages ([tool.mypy] in pyproject.toml: the files,
# and the few libraries or lines it takes on trust, each with why). Incremental: .mypy_cache/.
MYPY := $(PY) -m mypy

# The docs site (docs/, mkdocs.yml) into site/: a broken link or anchor, or a nav entry
# without its page, fails the build (--strict). Offline: no fonts or scripts fetched.
# (Not --quiet: mkdocs 1.6 then stops counting warnings, and --strict passes a broken link.)
MKDOCS := NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

## The docs site, built into site/ (open site/index.html).
docs: setup
	$(MKDOCS)

## The console's screenshots in docs/images/, from four runs of `make run`'s pipeline
## (under runs/screenshots/), taken by the browser test that walks the console (a few minutes),
## and the Serving page's over a real `tfxp serve` under load with a hot swap.
screenshots: setup
	UPDATE_SCREENSHOTS=1 $(PY) -m pytest tests/e2e/test_ui_browser.py tests/e2e/test_serving_page_browser.py -k "screenshots or serving_page_charts" -p no:cacheprovider

bench: setup
	$(PY) benchmarks/taxi_vs_tfx_example.py $(ARGS)

## Re-resolve requirements.in into the pinned lock (needs uv; ~15 s).
lock: setup
	.venv/bin/uv pip compile requirements.in -o requirements.lock --python-version 3.11 \
	  --python-platform x86_64-manylinux2014 --generate-hashes --quiet

clean:
	rm -rf runs site .pytest_cache .ruff_cache
