"""The console's pages: runs, a run, executions, artifacts, lineage, compare, datasets, serving.

Every handler asks `tfxp.ui.browse.StoreBrowser` (the metadata layer) and
hands plain values to a Jinja2 template; nothing here queries ML Metadata
itself. Handlers are plain functions that Starlette runs in its thread pool;
each holds the browser's lock while it reads (`_one_at_a_time`): ML Metadata's
store object and the cached Lineage are not for concurrent use.
"""

from __future__ import annotations

import functools
import logging
import mimetypes
import os
import sqlite3
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Route

from metadata.store import LineageError, MetadataStoreError
from tfxp.presentation.lineage_report import model_graph, run_facts, span_graph
from tfxp.ui import views
from tfxp.ui.browse import StoreBrowser
from tfxp.ui.files import artifact_files, property_items, resolve_file


def _browser(request: Request) -> StoreBrowser:
    browser: StoreBrowser = request.app.state.browser
    browser.refresh()
    return browser


def _render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    templates = request.app.state.templates
    context.setdefault("where", request.app.state.browser.location.describe())
    return templates.TemplateResponse(request, name, context, status_code=status)


def _int(value: str | None, what: str) -> int:
    try:
        return int(value or "")
    except ValueError:
        raise HTTPException(404, f"{what} must be a number, not {value!r}") from None


# -- pages ---------------------------------------------------------------------


def runs_page(request: Request) -> Response:
    browser = _browser(request)
    q = request.query_params
    pipeline, dataset = q.get("pipeline") or None, q.get("dataset") or None
    page = browser.run_rows(pipeline, dataset, _int(q.get("page") or "1", "page"))
    return _render(
        request,
        "runs.html",
        page=page,
        pipelines=browser.pipelines(),
        datasets=sorted({browser.datasets.get(p) for p in browser.pipelines()} - {None}),
        pipeline=pipeline,
        dataset=dataset,
    )


def run_page(request: Request) -> Response:
    browser = _browser(request)
    pipeline, run_id = request.query_params.get("pipeline", ""), request.query_params.get("id", "")
    lin = browser.lineage(pipeline)
    if run_id not in lin.runs:
        raise HTTPException(404, f"no run {run_id!r} of pipeline {pipeline!r}")
    row = browser.run_row(pipeline, run_id)
    graph = views.run_graph(browser, lin, row.info)
    return _render(
        request,
        "run.html",
        row=row,
        graph=graph,
        gate=browser.gate(lin, run_id),
        log=browser.log_path(run_id),
        log_exists=os.path.exists(browser.log_path(run_id) or ""),
    )


def execution_page(request: Request) -> Response:
    browser = _browser(request)
    execution_id = _int(request.path_params["execution_id"], "execution id")
    lin, ex = browser.find_execution(execution_id)
    return _render(
        request,
        "execution.html",
        ex=ex,
        pipeline=lin.pipeline,
        node=lin.node_of.get(ex.id, "?"),
        run=lin.run_of.get(ex.id),
        state=lin.state(ex),
        type_name=lin.exec_type(ex),
        seconds=round(
            max(0, ex.last_update_time_since_epoch - ex.create_time_since_epoch) / 1000, 1
        ),
        properties=property_items(ex),
        artifacts=browser.execution_artifacts(lin, ex.id),
        started=views.when(ex.create_time_since_epoch),
    )


def artifact_page(request: Request) -> Response:
    browser = _browser(request)
    artifact_id = _int(request.path_params["artifact_id"], "artifact id")
    lin, art = browser.find_artifact(artifact_id)
    type_name = lin.type_of(art)
    context = dict(
        art=art,
        type_name=type_name,
        pipeline=lin.pipeline,
        properties=property_items(art),
        events=browser.artifact_events(lin, art.id),
        files=artifact_files(art.uri),
        created=views.when(art.create_time_since_epoch),
        special=views.artifact_details(browser, lin, art, type_name),
    )
    return _render(request, "artifact.html", **context)


def model_lineage_page(request: Request) -> Response:
    browser = _browser(request)
    model_id = _int(request.path_params["model_id"], "model id")
    lin, art = browser.find_artifact(model_id)
    if lin.type_of(art) != "Model":
        raise HTTPException(404, f"artifact {model_id} is a {lin.type_of(art)}, not a Model")
    lineage = lin.model_lineage(art, with_metrics=False)
    spans = [(lin.pipeline, s) for s in lineage.spans]
    title = f"Lineage of model #{model_id}"
    graph = model_graph(lin, lineage)
    return _lineage(request, title, graph, model=lineage, span_links=spans)


def span_lineage_page(request: Request) -> Response:
    browser = _browser(request)
    pipeline = request.query_params.get("pipeline", "")
    span = _int(request.query_params.get("span"), "span")
    lin = browser.lineage(pipeline)
    result = lin.span_lineage(span)
    title = f"Span {span} of pipeline {pipeline}: the models trained on it"
    return _lineage(request, title, span_graph(result), span=result, pipeline=pipeline)


def _lineage(request: Request, title: str, graph, **context: Any) -> Response:
    return _render(
        request, "lineage.html", title=title, graph=views.lineage_graph(graph), **context
    )


def compare_page(request: Request) -> Response:
    from metadata.diff import diff_report

    browser = _browser(request)
    q = request.query_params
    pipeline = q.get("pipeline", "")
    lin = browser.lineage(pipeline)
    runs = list(reversed(lin.runs))
    a = q.get("a") or (runs[1] if len(runs) > 1 else runs[0] if runs else "")
    b = q.get("b") or (runs[0] if runs else "")
    report = None
    if a and b:
        a, b = lin.resolve_run(a), lin.resolve_run(b)
        report = diff_report(a, b, run_facts(lin, a), run_facts(lin, b))
    series = browser.metric_series(lin)
    return _render(
        request,
        "compare.html",
        pipeline=pipeline,
        runs=runs,
        a=a,
        b=b,
        report=report,
        charts=views.metrics_charts(series),
    )


def datasets_page(request: Request) -> Response:
    browser = _browser(request)
    out = []
    for pipeline in browser.pipelines():
        lin = browser.lineage(pipeline)
        out.append(
            {
                "pipeline": pipeline,
                "dataset": browser.datasets.get(pipeline),
                "spans": browser.dataset_spans(lin),
                "runs": len(lin.runs),
            }
        )
    return _render(request, "datasets.html", datasets=out)


def _log_folders(browser: StoreBrowser) -> list[tuple[str, str]]:
    """(pipeline, request-log folder) of every data root the store's runs read."""
    from pipeline.config import serving_log_dir_of

    return [
        (pipeline, serving_log_dir_of(root))
        for pipeline in browser.pipelines()
        for root in browser.data_roots(browser.lineage(pipeline))
    ]


def serving_page(request: Request) -> Response:
    """Live traffic per model version from each data folder's request log, the charts
    over time (sampled metrics and the request log), and the last skew check of
    `tfxp watch --skew-every`."""
    from tfxp.monitor import skew, traffic
    from tfxp.ui import serving_charts

    browser = _browser(request)
    state = browser.state_dir()
    folders = _log_folders(browser)
    logs = [
        {"pipeline": p, "dataset": browser.datasets.get(p), "traffic": traffic.traffic(folder)}
        for p, folder in folders
    ]
    sampler = request.app.state.sampler
    series = serving_charts.collect(sampler, [folder for _, folder in folders])
    return _render(
        request,
        "serving.html",
        logs=logs,
        skew=skew.read_result(state) if state else None,
        windows=traffic.WINDOWS,
        sampler=serving_charts.as_json({}, sampler)["sampler"],
        charts={model: serving_charts.figures(s) for model, s in series.items()},
        swaps={
            model: [(serving_charts.iso(at), whats) for at, whats in serving_charts.swap_groups(s)]
            for model, s in series.items()
        },
    )


def serving_series(request: Request) -> Response:
    """The numbers behind the Serving page's charts: /serving/series.json or .csv
    (`?model=NAME` for one model)."""
    from starlette.responses import JSONResponse, PlainTextResponse

    from tfxp.ui import serving_charts

    browser = _browser(request)
    sampler = request.app.state.sampler
    series = serving_charts.collect(sampler, [folder for _, folder in _log_folders(browser)])
    model = request.query_params.get("model")
    if model:
        series = {k: v for k, v in series.items() if k == model}
    if request.path_params["format"] == "csv":
        return PlainTextResponse(serving_charts.as_csv(series), media_type="text/csv")
    if request.path_params["format"] != "json":
        raise HTTPException(404, "the series come as series.json or series.csv")
    return JSONResponse(serving_charts.as_json(series, sampler))


# -- files ---------------------------------------------------------------------


def _file_response(path: str) -> Response:
    """An artifact's file: HTML sandboxed (its scripts run, but in an origin of
    their own), text as text, anything else as a download."""
    kind, _ = mimetypes.guess_type(path)
    if kind == "text/html":
        return FileResponse(
            path,
            media_type="text/html",
            headers={"Content-Security-Policy": "sandbox allow-scripts"},
        )
    if kind and (kind.startswith("text/") or kind in ("application/json",)):
        return FileResponse(path, media_type="text/plain; charset=utf-8")
    if path.endswith((".pbtxt", ".log", ".txt", ".csv")):
        return FileResponse(path, media_type="text/plain; charset=utf-8")
    return FileResponse(
        path, media_type="application/octet-stream", content_disposition_type="attachment"
    )


def artifact_file(request: Request) -> Response:
    browser = _browser(request)
    # An unknown id raises LineageError: a 404 page (exception_handlers).
    _, art = browser.find_artifact(_int(request.path_params["artifact_id"], "artifact id"))
    path = resolve_file(art.uri, request.path_params["path"])
    if path is None:
        raise HTTPException(404, "no such file under this artifact")
    return _file_response(path)


def gate_report_file(request: Request) -> Response:
    """A blocked run's report: the gate raised, so no artifact holds it; the failed
    execution records its path, served only from the run directory's reports/."""
    browser = _browser(request)
    _, ex = browser.find_execution(_int(request.path_params["execution_id"], "execution id"))
    from metadata.properties import prop

    recorded = prop(ex, "gate_report")
    folder = browser.reports_dir()
    path = (
        resolve_file(folder, os.path.basename(recorded))
        if recorded
        and folder
        and os.path.dirname(os.path.realpath(recorded)) == os.path.realpath(folder)
        else None
    )
    if path is None:
        raise HTTPException(404, "no report for this execution in the run directory")
    return _file_response(path)


def plotly_js(request: Request) -> Response:
    """plotly.js from the installed plotly package: no CDN, works offline."""
    import plotly

    path = os.path.join(os.path.dirname(plotly.__file__), "package_data", "plotly.min.js")
    return FileResponse(
        path, media_type="text/javascript", headers={"Cache-Control": "max-age=86400"}
    )


# -- errors --------------------------------------------------------------------


def _error_page(request: Request, status: int, title: str, message: str) -> Response:
    try:
        return _render(request, "error.html", status=status, title=title, message=message)
    except Exception:  # noqa: BLE001 - the error page itself must not fail
        return HTMLResponse(f"<h1>{status}</h1>", status_code=status)


def _http_error(request: Request, exc: HTTPException) -> Response:
    title = "Not found" if exc.status_code == 404 else f"Error {exc.status_code}"
    return _error_page(request, exc.status_code, title, str(exc.detail))


def _store_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, MetadataStoreError):
        return _error_page(request, 503, "The ML Metadata store cannot be read", str(exc))
    if isinstance(exc, LineageError):
        return _error_page(request, 404, "Not in the store", str(exc))
    text = " ".join(str(exc).split())[:300]
    # Not a store problem we know: the page says it in one line, the terminal has it all.
    logging.getLogger("tfxp.ui").error("%s %s", request.url.path, text, exc_info=exc)
    if "locked" in text.lower() or "busy" in text.lower():
        return _error_page(
            request,
            503,
            "The store is being written",
            f"A run is writing to the store right now ({text}); reload in a moment.",
        )
    return _error_page(
        request,
        500,
        "The store could not be read",
        f"{type(exc).__name__}: {text}. If a run is writing to the store, reload in a moment.",
    )


def exception_handlers() -> dict:
    return {
        HTTPException: _http_error,
        MetadataStoreError: _store_error,
        LineageError: _store_error,
        sqlite3.Error: _store_error,
        Exception: _store_error,
    }


def add_filters(env) -> None:
    env.filters["when"] = views.when
    env.filters["number"] = views.number
    env.filters["size"] = views.size


def _one_at_a_time(handler):
    @functools.wraps(handler)
    def locked(request: Request) -> Response:
        with request.app.state.browser.lock:
            return handler(request)

    return locked


def routes() -> list[Route]:
    pages = [
        ("/", runs_page),
        ("/run", run_page),
        ("/execution/{execution_id}", execution_page),
        ("/artifact/{artifact_id}", artifact_page),
        ("/artifact/{artifact_id}/file/{path:path}", artifact_file),
        ("/execution/{execution_id}/gate-report", gate_report_file),
        ("/lineage/model/{model_id}", model_lineage_page),
        ("/lineage/span", span_lineage_page),
        ("/compare", compare_page),
        ("/datasets", datasets_page),
        ("/serving", serving_page),
        ("/serving/series.{format}", serving_series),
    ]
    return [Route(path, _one_at_a_time(handler)) for path, handler in pages]
