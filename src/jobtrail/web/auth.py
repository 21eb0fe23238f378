"""Bearer tokens: ``JOBTRAIL_TOKENS="tok1:admin,tok2:read,tok3:admin:tenantA"``.

``read`` tokens may GET; ``admin`` tokens may also act (POST). A token bound to a tenant sees
only that tenant's tasks. With no tokens configured every request is allowed — and the server
refuses to listen anywhere but loopback (see ``server.check_bind``).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

ROLES = ("read", "admin")


@dataclass(frozen=True)
class Principal:
    role: str
    tenant: str | None = None

    @property
    def admin(self) -> bool:
        return self.role == "admin"


OPEN = Principal("admin")  # no tokens configured (loopback only)


@dataclass(frozen=True)
class Token:
    secret: str
    principal: Principal


def parse_tokens(text: str | None) -> list[Token]:
    """Parse ``token:role[:tenant]`` entries separated by commas; a bad entry raises
    ``ValueError`` naming its position (never its secret)."""
    tokens: list[Token] = []
    for i, entry in enumerate((text or "").split(",")):
        entry = entry.strip()
        if not entry:
            continue
        parts = entry.split(":")
        if len(parts) not in (2, 3) or not parts[0] or parts[1] not in ROLES:
            raise ValueError(
                f"JOBTRAIL_TOKENS entry {i + 1} must look like token:read, token:admin or "
                "token:admin:tenant"
            )
        if len(parts) == 3 and not parts[2]:
            raise ValueError(f"JOBTRAIL_TOKENS entry {i + 1} has an empty tenant")
        tenant = parts[2] if len(parts) == 3 else None
        tokens.append(Token(parts[0], Principal(parts[1], tenant)))
    return tokens


def authenticate(tokens: list[Token], header: str | None) -> Principal | None:
    """The principal of an ``Authorization: Bearer`` header, or ``None``. Every configured
    token is compared in constant time, so timing does not tell which prefix matched."""
    if not tokens:
        return OPEN
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    given = value.strip().encode("utf-8")
    found: Principal | None = None
    for token in tokens:
        if hmac.compare_digest(given, token.secret.encode("utf-8")):
            found = token.principal
    return found
