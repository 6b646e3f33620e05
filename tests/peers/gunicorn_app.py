"""A WSGI module for running a test server under a real gunicorn (``gunicorn_app:app``).

Bodies are capped at 2 KiB so that a test can send one just past the cap.
"""

from mcp_sync import Server

MAX_BODY_BYTES = 2048

server = Server("gunicorn-test", version="1.0.0")


@server.tool()
def echo(text: str) -> str:
    """Echo the text."""
    return text


app = server.wsgi_app(path="/mcp", max_body_bytes=MAX_BODY_BYTES)
