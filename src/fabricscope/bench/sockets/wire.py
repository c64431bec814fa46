"""Data-plane wire constants shared by the protocol (pydantic) and the workers (stdlib only)."""

import struct

COOKIE_BYTES = 16
# UDP throughput datagram header: session(8) stream(4) seq(8) send_ns(8).
UDP_HEADER = struct.Struct("!8sIQQ")
UDP_HEADER_BYTES = UDP_HEADER.size
# Request/response message header: msg_len(4, header included) resp_len(4) flags(4).
RR_HEADER = struct.Struct("!III")
RR_HEADER_BYTES = RR_HEADER.size
RR_CLOSE = 1  # flag: the responder closes the connection after its response
# UDP round-trip datagram header: session(8) seq(8).
UDP_RR_HEADER = struct.Struct("!8sQ")
GO_BYTE = b"G"  # sent by a receiving client to start a server-side sender
MAX_UDP_PAYLOAD = 65507
MAX_RR_BYTES = 1024 * 1024 + 64
