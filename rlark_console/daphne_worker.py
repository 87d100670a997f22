"""One web-tier worker: daphne's command line with a request that refuses an oversized body while it arrives.

daphne reads a request's whole body (into memory or a temporary file) before it calls the ASGI application, so
:class:`rlark_console.bodylimit.BodyLimitMiddleware` alone would answer a 50 MB upload only once all of it was
received. :class:`LimitedWebRequest` checks the declared ``Content-Length`` as soon as the headers are parsed, and
counts the bytes of a chunked body as they come: past ``RLARK_MAX_REQUEST_BYTES`` it writes the 413 at once,
stops sending, keeps no more of the body (what is still in flight is discarded for at most :data:`LINGER_SECONDS`
so the client can read the answer instead of a reset), then closes the connection.

Run as ``python -m rlark_console.daphne_worker <daphne arguments>`` (``rlark_console.webserver`` does).
"""

from __future__ import annotations

import sys
from http import HTTPStatus

from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory, WebRequest

from rlark_console.bodylimit import max_request_bytes, too_large_response

LINGER_SECONDS = 5.0


class LimitedWebRequest(WebRequest):
    """daphne's request with the body limit of :func:`rlark_console.bodylimit.max_request_bytes`."""

    refused = False
    received = 0

    def gotLength(self, length: int | None) -> None:  # noqa: N802 - Twisted's name
        """``length``: the declared body size in bytes, None when chunked."""
        super().gotLength(length)
        limit = max_request_bytes()
        if limit > 0 and length is not None and length > limit:
            self.refuse()

    def handleContentChunk(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
        """Keep ``data`` unless the body has passed the limit (then refuse, and drop the rest)."""
        if self.refused:
            return
        self.received += len(data)
        limit = max_request_bytes()
        if limit > 0 and self.received > limit:
            self.refuse()
            return
        super().handleContentChunk(data)

    def process(self):  # noqa: D102 - a refused request never reaches the application
        if self.refused:
            return None
        return super().process()

    def refuse(self) -> None:
        """Write the 413 (:func:`too_large_response`) on the connection, half-close it, close it after
        :data:`LINGER_SECONDS`."""
        self.refused = True
        headers = [(name, value) for name, values in self.requestHeaders.getAllRawHeaders() for value in values]
        path = (self.path or getattr(self.channel, "_path", None) or b"/").split(b"?", 1)[0]  # set once all is read
        status, response_headers, body = too_large_response(path.decode("latin-1"), headers)
        head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}".encode()]
        head += [name + b": " + value for name, value in response_headers]
        from twisted.internet import reactor  # daphne.server installed the asyncio reactor on import

        transport = self.channel.transport
        transport.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
        transport.loseWriteConnection()
        reactor.callLater(LINGER_SECONDS, transport.loseConnection)


class LimitedHTTPFactory(HTTPFactory):
    """daphne's HTTP factory whose connections make :class:`LimitedWebRequest` requests."""

    def buildProtocol(self, addr):  # noqa: N802, D102 - Twisted's name
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = LimitedWebRequest
        return protocol


def main(argv: list[str] | None = None) -> None:
    """daphne's command line (``argv``: its arguments) with :class:`LimitedHTTPFactory`."""
    import daphne.server

    daphne.server.HTTPFactory = LimitedHTTPFactory
    CommandLineInterface().run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
