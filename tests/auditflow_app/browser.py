"""What the headless-Chromium tests share: the app under uvicorn on a loopback port, Debian's
Chromium through Selenium, and the skip-or-fail rule when either is missing."""

from __future__ import annotations

import logging
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from auditflow_app.analyst_api import WEB_DIR

from ..conftest import in_ci


def need(what: str, test: str = "the web view tests") -> None:
    """Skip without ``what`` on a developer machine; fail where ``CI`` is set."""
    msg = f"{test} need {what} (make setup and make browser install it)"
    if in_ci():
        pytest.fail(f"CI is set: {msg}", pytrace=False)
    pytest.skip(msg)


def need_front_end() -> None:
    if not (WEB_DIR / "node_modules/cytoscape/dist/cytoscape.min.js").is_file():
        need("web/node_modules (npm ci in web/)")


class Requests(logging.Handler):
    """Every access-log line the server wrote."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextmanager
def served(app) -> Iterator[tuple[str, Requests]]:
    """``app`` under uvicorn in a thread on a free loopback port: its base URL and its access log.
    The socket names TCP (a protocol number of 0 leaves Nagle on: ~44 ms a request)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, log_level="info", access_log=True, log_config=None, lifespan="off"))
    log = Requests()
    access = logging.getLogger("uvicorn.access")
    access.addHandler(log)
    access.setLevel(logging.INFO)
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", log
    finally:
        srv.should_exit = True
        thread.join(10)
        access.removeHandler(log)
        sock.close()


def chromium(window: str, downloads: Path | None = None):
    """A new headless Chromium session (its own session storage); downloads saved into
    ``downloads`` without asking, where given."""
    chromium_bin, driver_bin = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium_bin is None or driver_bin is None:
        need("Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium_bin
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={window}", "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    if downloads is not None:
        opts.add_experimental_option("prefs", {
            "download.default_directory": str(downloads), "download.prompt_for_download": False,
            "download.directory_upgrade": True, "safebrowsing.enabled": True,
        })  # fmt: skip
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_bin), options=opts)
    driver.set_script_timeout(20)
    return driver
