"""Reading an upload: a `multipart/form-data` body parsed as it streams in, its `file` part
kept in memory and counted, so that a body past the cap is refused (413) without being held."""

from dataclasses import dataclass, field

from fastapi import Request
from python_multipart import MultipartParser
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import parse_options_header
from starlette.requests import ClientDisconnect

from app.api.errors import BAD_REQUEST, PAYLOAD_TOO_LARGE, VALIDATION, ApiError, FieldProblem

FILE_FIELD = "file"
# What a body may hold besides the file: the multipart framing, part headers, small fields.
FRAMING_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class Upload:
    name: str
    data: bytes


def _invalid(message: str, where: str = "body") -> ApiError:
    return ApiError(
        VALIDATION,
        "the upload is not valid; see `errors`",
        errors=[FieldProblem(field=where, message=message)],
    )


def _too_large(max_bytes: int) -> ApiError:
    return ApiError(PAYLOAD_TOO_LARGE, f"the file is larger than {max_bytes} bytes")


@dataclass
class _Parts:
    """The parser's callbacks: the `file` part's bytes and name; other parts are skipped."""

    max_bytes: int
    header_name: bytearray = field(default_factory=bytearray)
    header_value: bytearray = field(default_factory=bytearray)
    disposition: dict[bytes, bytes] | None = None
    in_file: bool = False
    files: int = 0
    name: str = ""
    data: bytearray = field(default_factory=bytearray)
    too_large: bool = False
    ended: bool = False

    def on_part_begin(self) -> None:
        self.disposition = None
        self.in_file = False

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.header_name += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.header_value += data[start:end]

    def on_header_end(self) -> None:
        if bytes(self.header_name).strip().lower() == b"content-disposition":
            # Latin-1 keeps the raw bytes: a browser sends a UTF-8 file name as is.
            _, options = parse_options_header(bytes(self.header_value).decode("latin-1"))
            self.disposition = options
        self.header_name.clear()
        self.header_value.clear()

    def on_headers_finished(self) -> None:
        options = self.disposition or {}
        filename = options.get(b"filename")
        # A part without a file name is a form field, not a file.
        if options.get(b"name") != FILE_FIELD.encode() or filename is None:
            return
        self.in_file = True
        self.files += 1
        self.name = filename.decode("utf-8", errors="replace")

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if not self.in_file or self.too_large or self.files > 1:
            return
        if len(self.data) + (end - start) > self.max_bytes:
            # Read on (and dropped), so that the client gets the answer rather than a reset.
            self.too_large = True
            self.data.clear()
            return
        self.data += data[start:end]

    def on_end(self) -> None:
        self.ended = True


async def read_upload(request: Request, *, max_bytes: int) -> Upload:
    """The `file` part of a `multipart/form-data` request: 413 past `max_bytes` (at once when
    `Content-Length` says so, else as the bytes arrive), 422 for any other kind of body."""
    kind, options = parse_options_header(request.headers.get("content-type"))
    boundary = options.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise _invalid(f"must be multipart/form-data with a `{FILE_FIELD}` part")
    cap = max_bytes + FRAMING_BYTES
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise _too_large(max_bytes)
    parts = _Parts(max_bytes)
    try:
        parser = MultipartParser(
            boundary,
            {
                "on_part_begin": parts.on_part_begin,
                "on_header_field": parts.on_header_field,
                "on_header_value": parts.on_header_value,
                "on_header_end": parts.on_header_end,
                "on_headers_finished": parts.on_headers_finished,
                "on_part_data": parts.on_part_data,
                "on_end": parts.on_end,
            },
        )
        received = 0
        async for chunk in request.stream():
            received += len(chunk)
            if received > cap:
                raise _too_large(max_bytes)
            parser.write(chunk)
    except FormParserError:
        raise _invalid("not a valid multipart/form-data body") from None
    except ClientDisconnect:
        raise ApiError(BAD_REQUEST, "the client went away during the upload") from None
    if parts.too_large:
        raise _too_large(max_bytes)
    if not parts.ended:
        raise _invalid("the multipart/form-data body ends before its closing boundary")
    if parts.files == 0:
        raise _invalid(f"a `{FILE_FIELD}` part is required", f"body.{FILE_FIELD}")
    if parts.files > 1:
        raise _invalid(f"one `{FILE_FIELD}` part per upload", f"body.{FILE_FIELD}")
    return Upload(parts.name, bytes(parts.data))
