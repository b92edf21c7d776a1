"""Real endpoints on 127.0.0.1 for the web tools' tests: an aiohttp app on a free port, a
listening socket that must see no connection, a resolver the test scripts, a small PDF, a
self-signed certificate."""

import datetime
import ipaddress
import socket
import ssl
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from uuid import uuid4

from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from app.resources.secrets import OpenedSecrets, TenantSecrets
from app.tools.errors import ToolError
from app.tools.models import ToolCallContext
from app.tools.net import IPAddress
from app.tools.services import NetworkPolicy, ToolServices

LOOPBACK = "127.0.0.1"


@asynccontextmanager
async def serve(
    app: web.Application, host: str = LOOPBACK, *, ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[int]:
    """`app` served on `host`, on a free port (yielded)."""
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.1)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, 0, ssl_context=ssl_context).start()
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()


class Listener:
    """A socket listening on `host` that nothing may reach: `connections()` accepts (without
    waiting) whatever connected to it and counts it. A TCP connect completes in the kernel
    before the caller's `connect()` returns, so by the time a refused call has returned, any
    connection it made is already waiting here."""

    def __init__(self, host: str = LOOPBACK, port: int = 0) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.bind((host, port))
        self._socket.listen(16)
        self._socket.setblocking(False)
        self.port: int = self._socket.getsockname()[1]

    def connections(self) -> int:
        count = 0
        while True:
            try:
                connection, _ = self._socket.accept()
            except BlockingIOError:
                return count
            connection.close()
            count += 1

    def __enter__(self) -> "Listener":
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._socket.close()


class ScriptedResolver:
    """Names the test made up, each to its scripted addresses: `first` answers a name's first
    lookup, `later` (if it names it) every further one. Other names are unknown. Records every
    lookup."""

    def __init__(
        self, first: Mapping[str, Sequence[str]], later: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        self._first = first
        self._later = later or {}
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int) -> list[IPAddress]:
        seen = host in self.lookups
        self.lookups.append(host)
        answer = self._later.get(host) if seen else None
        if answer is None:
            answer = self._first.get(host)
        if answer is None:
            raise ToolError(f"could not resolve {host}: unknown name")
        return [ipaddress.ip_address(address) for address in answer]


def context(
    allow: Iterable[str] = (),
    *,
    secrets: Mapping[str, str] | None = None,
    services: bool = True,
) -> ToolCallContext:
    """A call context whose run may reach what `allow` lists (hosts or CIDRs)."""
    given = (
        ToolServices(
            # The run's secrets as the vault gives them, without a database behind them.
            secrets=TenantSecrets(OpenedSecrets(dict(secrets), {}))
            if secrets is not None
            else None,
            network=NetworkPolicy.of(allow),
        )
        if services
        else None
    )
    return ToolCallContext(task_id="t", agent_id="a", chain_id=uuid4(), services=given)


def minimal_pdf(pages: Sequence[str], *, title: str | None = None) -> bytes:
    """A valid PDF with one line of Helvetica text per page, written by hand."""
    objects: list[bytes] = []
    count = len(pages)
    kids = " ".join(f"{4 + 2 * index} 0 R" for index in range(count))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for index, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 18 Tf 72 720 Td ({escaped}) Tj ET".encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {5 + 2 * index}"
            " 0 R /Resources << /Font << /F1 3 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    info = None
    if title is not None:
        objects.append(f"<< /Title ({title}) >>".encode("latin-1"))
        info = len(objects)
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    trailer = f"<< /Size {len(objects) + 1} /Root 1 0 R"
    trailer += f" /Info {info} 0 R >>" if info else " >>"
    out += f"trailer\n{trailer}\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def self_signed(name: str, directory: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A certificate for `name` (and nothing else): the server's context and a client
    context that trusts only it."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file = directory / f"{name}.pem"
    key_file = directory / f"{name}.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cafile=str(cert_file))
    return server, client
