"""A minimal Streamlit client at the protocol level, for the load script: one `Session` is one browser tab's traffic,
without the browser.

What a browser does to show a page, and what `Session.open` does in the same order (Streamlit 1.67, Starlette
server; read from streamlit/web/server/starlette/starlette_websocket.py, runtime/app_session.py and the frontend's
`sendRerunBackMsg`):
1. GET the page (index.html; it sets the `_streamlit_xsrf` cookie) and, on a tab's first page (`assets=True`), the
   entry script and the modules index.html preloads, as a browser with an empty cache does;
2. GET /_stcore/health and /_stcore/host-config;
3. open the WebSocket /_stcore/stream with the subprotocols ["streamlit", <xsrf token>] and the page's Origin;
4. send a BackMsg `rerun_script` (a ClientState): on a tab's first run `page_name` is the URL path below the app
   ("" for the default page, "report", "live") with an empty `page_script_hash`, `query_string` is the URL's query
   without "?", and `context_info` says the URL, time zone and locale; later runs send the page's script hash (an
   st.navigation app names it in the `navigation` message; `new_session` names app.py) and the widgets' values
   (`widget_states`, a pressed button as `trigger_value`); a fragment's timer (`auto_rerun`) sends `fragment_id` and
   `is_auto_rerun`;
5. read ForwardMsgs (one binary frame each) until `script_finished`: FINISHED_SUCCESSFULLY (or, for a fragment,
   FINISHED_FRAGMENT_RUN_SUCCESSFULLY) ends the run; FINISHED_EARLY_FOR_RERUN means `st.rerun()` and the server
   starts the next run by itself; FINISHED_WITH_COMPILE_ERROR is a failure.

The server replaces a message by a reference (`ref_hash`) only when the rerun request lists it in
`cached_message_hashes`; this client lists none (a new tab has an empty cache too), so every element arrives whole,
and a reference would be counted as a problem. The client does no layout or drawing: its "rendered" page is the
server's complete answer (every element of the run), which is all the server does for a browser too.
"""
from __future__ import annotations

import asyncio
import gzip
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState, ContextInfo
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Origin, Subprotocol

FINISHED = {ForwardMsg.FINISHED_SUCCESSFULLY: "finished", ForwardMsg.FINISHED_WITH_COMPILE_ERROR: "compile error",
            ForwardMsg.FINISHED_EARLY_FOR_RERUN: "rerun", ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY: "fragment"}
_ASSET = re.compile(rb'<(?:script[^>]*\ssrc|link[^>]*rel="(?:modulepreload|stylesheet)"[^>]*\shref)="\./([^"]+)"')
_MD_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


class ProtocolError(Exception):
    """The server answered something this client cannot take: an HTTP error, a closed socket, a timeout."""


def plain(text: str) -> str:
    """Text as a reader sees it: Markdown escapes resolved, zero-width spaces dropped, whitespace collapsed."""
    return " ".join(_MD_ESCAPE.sub(r"\1", text).replace("\u200b", "").split())


async def http_get(host: str, port: int, target: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 GET on its own connection: the status, the headers (lower-case names; repeated ones joined by
    "\\n") and the body (de-chunked, still compressed if the server compressed it)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        lines = [f"GET {target} HTTP/1.1", f"Host: {host}:{port}", "Connection: close",
                 *(f"{k}: {v}" for k, v in headers.items()), "", ""]
        writer.write("\r\n".join(lines).encode("latin-1"))
        await writer.drain()
        data = await reader.read()
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise ProtocolError(f"GET {target}: no HTTP answer")
    out: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        key = name.strip().lower()
        out[key] = f"{out[key]}\n{value.strip()}" if key in out else value.strip()
    if out.get("transfer-encoding", "").lower() == "chunked":
        body = _dechunk(body)
    return int(parts[1]), out, body


def _dechunk(data: bytes) -> bytes:
    out, i = bytearray(), 0
    while True:
        j = data.index(b"\r\n", i)
        size = int(data[i:j].split(b";")[0], 16)
        if size == 0:
            return bytes(out)
        out += data[j + 2:j + 2 + size]
        i = j + 2 + size + 2


@dataclass
class Widget:
    kind: str  # the Element field: "text_input", "button", "text_area", ...
    id: str
    label: str


@dataclass
class Run:
    """What the server sent for one script run (with the runs `st.rerun()` chained to it): the counts, every text
    of every element, the widgets by label, the alerts, and what went wrong."""

    status: str = "no answer"
    seconds: float = 0.0
    messages: int = 0
    bytes: int = 0
    deltas: int = 0
    elements: int = 0
    blocks: int = 0
    reruns: int = 0  # FINISHED_EARLY_FOR_RERUN seen: st.rerun() chained a further run
    kinds: dict[str, int] = field(default_factory=dict)  # element kind -> count
    texts: list[str] = field(default_factory=list)
    headings: list[str] = field(default_factory=list)
    alerts: list[tuple[str, str]] = field(default_factory=list)  # (ERROR|WARNING|INFO|SUCCESS, body)
    widgets: dict[str, Widget] = field(default_factory=dict)
    exceptions: list[str] = field(default_factory=list)  # exception elements (not warnings), compile errors
    problems: list[str] = field(default_factory=list)  # page not found, references, ...

    @property
    def ok(self) -> bool:
        """Finished (or a fragment finished) with no exception and nothing this client could not follow."""
        return self.status in ("finished", "fragment") and not self.exceptions and not self.problems

    def has_text(self, wanted: str) -> bool:
        """Whether `wanted` appears in one of the elements' texts, compared as a reader reads them."""
        w = plain(wanted)
        return any(w in plain(t) for t in self.texts)

    def error(self) -> str | None:
        """Why this run is not a rendered page, or None."""
        if self.exceptions:
            return f"exception: {self.exceptions[0][:160]}"
        if self.problems:
            return self.problems[0][:160]
        if self.status not in ("finished", "fragment"):
            return f"script {self.status}"
        return None


def _strings(msg: Any, out: list[str]) -> None:
    """Every string field of a protobuf message, depth first (labels, bodies, help texts, options, ids)."""
    for fd, value in msg.ListFields():
        if fd.type == fd.TYPE_STRING:
            out.extend(value if fd.is_repeated else [value])
        elif fd.type == fd.TYPE_MESSAGE:
            for sub in (value if fd.is_repeated else [value]):
                if fd.message_type.GetOptions().map_entry:
                    continue
                _strings(sub, out)


class Session:
    """One tab: `open` a page, `submit` a form, `rerun` a fragment, `close`. Not safe to share between tasks."""

    def __init__(self, base_url: str, *, headers: dict[str, str] | None = None, assets: bool = False,
                 timeout: float = 180.0) -> None:
        parts = urlsplit(base_url)
        self.base_url = base_url.rstrip("/")
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.headers = dict(headers or {})
        self.assets = assets  # fetch the entry scripts with the tab's first page, as an empty cache does
        self.timeout = timeout
        self.cookies: dict[str, str] = {}
        self.ws: ClientConnection | None = None
        self.url = ""
        self.query_string = ""
        self.page_hash = ""
        self.widget_values: dict[str, WidgetState] = {}  # what this tab has typed or chosen, by widget id
        self.auto_reruns: dict[str, float] = {}  # fragment id -> seconds, from auto_rerun
        self.http_bytes = 0
        self.session_id = ""  # the server's id of this tab's session, from its new_session message

    # -- HTTP ---------------------------------------------------------------------------------------------------
    async def _get(self, target: str) -> bytes:
        headers = {**self.headers, "Accept-Encoding": "gzip, deflate", "User-Agent": "st_client"}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        status, got, body = await http_get(self.host, self.port, target, headers)
        if status != 200:
            raise ProtocolError(f"GET {target}: HTTP {status}")
        for line in got.get("set-cookie", "").split("\n"):
            name, _, rest = line.partition("=")
            if name.strip() and rest:
                self.cookies[name.strip()] = rest.split(";")[0]
        self.http_bytes += len(body)
        return gzip.decompress(body) if got.get("content-encoding") == "gzip" else body

    async def _load_html(self, path: str) -> None:
        html = await self._get(path)
        if self.assets:
            self.assets = False  # once per tab: a browser caches them for the next pages
            wanted = list(dict.fromkeys(m.decode() for m in _ASSET.findall(html)))
            sem = asyncio.Semaphore(6)  # a browser's connections per host

            async def one(asset: str) -> None:
                async with sem:
                    await self._get("/" + asset)

            await asyncio.gather(*(one(a) for a in wanted))
        await asyncio.gather(self._get("/_stcore/health"), self._get("/_stcore/host-config"))

    # -- WebSocket ----------------------------------------------------------------------------------------------
    async def open(self, path: str = "/", query: str = "") -> Run:
        """Load `path` (?`query`) as a new tab would, or as a reload of this one: a new WebSocket session."""
        t0 = time.monotonic()
        await self.close()
        self.url = f"{self.base_url}{path}" + (f"?{query}" if query else "")
        self.query_string, self.page_hash = query, ""
        self.widget_values.clear()
        self.auto_reruns.clear()
        target = path + (f"?{query}" if query else "")
        try:
            await asyncio.wait_for(self._load_html(target), self.timeout)
            protocols = [Subprotocol("streamlit")]
            if "_streamlit_xsrf" in self.cookies:  # the browser's second "subprotocol": the XSRF token
                protocols.append(Subprotocol(self.cookies["_streamlit_xsrf"]))
            headers = dict(self.headers)
            if self.cookies:
                headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
            self.ws = await connect(f"ws://{self.host}:{self.port}/_stcore/stream", subprotocols=protocols,
                                    origin=Origin(f"http://{self.host}:{self.port}"),
                                    additional_headers=headers, proxy=None, max_size=None,
                                    open_timeout=self.timeout, ping_interval=None)
        except Exception as e:  # refused, HTTP error, handshake refused, timeout
            run = Run(status="not connected", seconds=time.monotonic() - t0)
            run.problems.append(f"{type(e).__name__}: {e}")
            return run
        run = await self._rerun(page_name=path.strip("/"))
        run.seconds = time.monotonic() - t0
        return run

    async def submit(self, values: dict[str, str], button: str, run: Run) -> Run:
        """Type `values` (label -> text) into the widgets of `run` and press the button labelled `button` (a form's
        submit button or a plain one): one rerun with the new values and the button's trigger."""
        states = []
        for label, text in values.items():
            w = run.widgets[label]
            self.widget_values[w.id] = WidgetState(id=w.id, string_value=text)
        states.append(WidgetState(id=run.widgets[button].id, trigger_value=True))
        t0 = time.monotonic()
        out = await self._rerun(extra=states)
        out.seconds = time.monotonic() - t0
        return out

    async def rerun_fragment(self, fragment_id: str) -> Run:
        """What a fragment's `run_every` timer sends: a rerun of that fragment only."""
        t0 = time.monotonic()
        out = await self._rerun(fragment_id=fragment_id, auto=True)
        out.seconds = time.monotonic() - t0
        return out

    async def _rerun(self, *, page_name: str = "", extra: list[WidgetState] | None = None, fragment_id: str = "",
                     auto: bool = False) -> Run:
        run = Run()
        if self.ws is None:
            run.problems.append("not connected")
            return run
        state = ClientState(query_string=self.query_string, page_script_hash=self.page_hash,
                            page_name="" if self.page_hash else page_name, fragment_id=fragment_id,
                            is_auto_rerun=auto,
                            context_info=ContextInfo(timezone="UTC", timezone_offset=0, locale="en-US",
                                                     url=self.url, is_embedded=False, color_scheme="light"))
        state.widget_states.widgets.extend([*self.widget_values.values(), *(extra or [])])
        try:
            await self.ws.send(BackMsg(rerun_script=state).SerializeToString())
            await asyncio.wait_for(self._read_until_finished(run), self.timeout)
        except TimeoutError:
            run.status = "timed out"
        except Exception as e:  # the socket closed, or a frame that is not a ForwardMsg
            run.status = "connection lost"
            run.problems.append(f"{type(e).__name__}: {str(e)[:120]}")
        return run

    async def _read_until_finished(self, run: Run) -> None:
        assert self.ws is not None
        while True:
            frame = await self.ws.recv()
            if isinstance(frame, str):
                raise ProtocolError("a text frame")
            run.messages += 1
            run.bytes += len(frame)
            msg = ForwardMsg()
            msg.ParseFromString(frame)
            kind = msg.WhichOneof("type")
            if kind == "new_session":
                self.session_id = msg.new_session.initialize.session_id or self.session_id
                if not msg.metadata.run.fragment_ids:  # a full run redraws the page: forget the chained runs' texts
                    run.texts.clear()
                    run.headings.clear()
                    run.alerts.clear()
                    run.widgets.clear()
                    self.auto_reruns.clear()
            elif kind == "navigation":  # st.navigation: the page this run shows (new_session names app.py)
                self.page_hash = msg.navigation.page_script_hash
            elif kind == "delta":
                self._take_delta(msg, run)
            elif kind == "page_info_changed":
                self.query_string = msg.page_info_changed.query_string
            elif kind == "auto_rerun":
                self.auto_reruns[msg.auto_rerun.fragment_id] = msg.auto_rerun.interval
            elif kind == "stop_auto_rerun":
                for fid in msg.stop_auto_rerun.fragment_ids:
                    self.auto_reruns.pop(fid, None)
            elif kind == "page_not_found":
                run.problems.append(f"page not found: {msg.page_not_found.page_name!r}")
            elif kind == "ref_hash":
                run.problems.append("a cached-message reference, though this client declared no cache")
            elif kind == "session_event" and msg.session_event.HasField("script_compilation_exception"):
                e = msg.session_event.script_compilation_exception
                run.exceptions.append(f"{e.type}: {e.message}")
            elif kind == "script_finished":
                run.status = FINISHED.get(msg.script_finished, str(msg.script_finished))
                if msg.script_finished == ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                    run.reruns += 1
                    continue
                return

    def _take_delta(self, msg: ForwardMsg, run: Run) -> None:
        run.deltas += 1
        delta = msg.delta
        dkind = delta.WhichOneof("type")
        if dkind == "add_block":
            run.blocks += 1
            return
        if dkind != "new_element":
            return
        run.elements += 1
        el = delta.new_element
        ekind = el.WhichOneof("type") or "?"
        run.kinds[ekind] = run.kinds.get(ekind, 0) + 1
        body: Any = getattr(el, ekind) if ekind != "?" else el
        _strings(body, run.texts)
        if ekind == "heading":
            run.headings.append(plain(el.heading.body))
        elif ekind == "alert":
            run.alerts.append((el.alert.Format.Name(el.alert.format), el.alert.body))
        elif ekind == "exception" and not el.exception.is_warning:
            run.exceptions.append(f"{el.exception.type}: {el.exception.message}")
        if isinstance(getattr(body, "id", None), str) and isinstance(getattr(body, "label", None), str) and body.id:
            run.widgets[body.label] = Widget(ekind, body.id, body.label)

    async def close(self) -> None:
        if self.ws is not None:
            ws, self.ws = self.ws, None
            try:
                await asyncio.wait_for(ws.close(), 10)
            except Exception:  # already gone: nothing to release
                pass
