"""`make serve`: preview a built site on loopback, as a static host serves it: a missing page is
answered with the site's own 404 page (status 404), not the HTTP server's bare error.

    python -m builder.serve [--directory site] [--port 8000]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
from pathlib import Path

from builder import routes

LOOPBACK = "127.0.0.1"


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    """Files from the site folder; a missing one gets the site's 404.html."""

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        page = Path(self.directory) / routes.NOT_FOUND
        if code != 404 or not page.is_file():
            super().send_error(code, message, explain)
            return
        body = page.read_bytes()
        self.send_response(404, message)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def server(directory: Path, port: int = 8000, host: str = LOOPBACK) -> http.server.ThreadingHTTPServer:
    handler = functools.partial(SiteHandler, directory=str(directory))
    return http.server.ThreadingHTTPServer((host, port), handler)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m builder.serve", description=__doc__.splitlines()[0])
    parser.add_argument("--directory", type=Path, default=Path("site"), help="the built site (default: site)")
    parser.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (default: 8000)")
    options = parser.parse_args()
    with server(options.directory, options.port) as running:
        print(f"serving {options.directory} on http://{LOOPBACK}:{options.port}/ (Ctrl-C stops)")
        with contextlib.suppress(KeyboardInterrupt):
            running.serve_forever()


if __name__ == "__main__":
    main()
