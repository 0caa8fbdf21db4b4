"""Which network addresses a crawl may connect to: global ones, unless the operator allows private ones.

A web root is a URL an admin types; without this check it would let the server fetch its own loopback services,
the cloud metadata endpoint (169.254.169.254) or anything on the private network, and index the answers. The host
is resolved once and the crawl connects to the checked address itself (never re-resolving), so a DNS answer that
changes between the check and the connection (DNS rebinding) cannot move it.
"""

import ipaddress
import socket

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# RFC 6052's well-known NAT64 prefix: the last 32 bits are an IPv4 address the gateway connects to.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class AddressRefused(Exception):
    """A host that does not resolve, or resolves to an address a crawl may not reach; the message says which."""


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, 6to4, NAT64), which is where a connection really goes."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_kind(address: IPAddress) -> str | None:
    """What makes ``address`` non-global ("loopback", "private", ...), or None for a public address."""
    if isinstance(address, ipaddress.IPv6Address) and (inner := _embedded_ipv4(address)) is not None:
        return address_kind(inner)
    # The specific kinds first, so the message says more than "not global".
    for kind, flag in (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
    ):
        if flag:
            return kind
    # Shared address space (100.64.0.0/10), documentation and benchmarking ranges and the like.
    return None if address.is_global else "not globally routable"


def resolve(host: str, port: int) -> tuple[IPAddress, ...]:
    """Every address ``host`` resolves to (an IP literal: itself), in the resolver's order; AddressRefused if none."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise AddressRefused(f"the host {host!r} does not resolve: {error}") from error
    found: dict[IPAddress, None] = {}
    for _family, _type, _proto, _name, sockaddr in infos:
        text = str(sockaddr[0]).partition("%")[0]  # an IPv6 scope id ("fe80::1%eth0") is no part of the address
        found.setdefault(ipaddress.ip_address(text), None)
    if not found:
        raise AddressRefused(f"the host {host!r} does not resolve")
    return tuple(found)


def checked_addresses(host: str, port: int, *, allow_private: bool) -> tuple[str, ...]:
    """The addresses a crawl of ``host`` connects to, refusing the host when any of them is not global.

    Any, not all: a name that resolves to a public and a private address would otherwise reach the private one
    whenever the public one fails to answer.
    """
    addresses = resolve(host, port)
    if not allow_private:
        for address in addresses:
            if (kind := address_kind(address)) is not None:
                raise AddressRefused(
                    f"the host {host!r} resolves to {address}, a {kind} address; "
                    "private and local addresses are crawled only with RAG_WEB_ALLOW_PRIVATE"
                )
    return tuple(str(address) for address in addresses)
