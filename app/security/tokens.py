"""Bearer JWTs: our own HS256 tokens and, through a JWKS, an external identity provider's,
verified with PyJWT against an explicit algorithm allow-list."""

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Self

import jwt

from app.config import Settings
from app.errors import OmniForgeError
from app.security.principal import Principal

if TYPE_CHECKING:
    from app.security.jwks import JWKSClient

logger = logging.getLogger(__name__)

HS256 = "HS256"
_MAX_SUBJECT_CHARS = 255
# How long a verified token is taken as verified again, at most (less when it expires sooner),
# and how many are kept.
VERIFIED_TTL_S = 60.0
VERIFIED_MAX = 10_000
_MAX_TENANT_CHARS = 64
_MAX_ROLE_CHARS = 64
# Control characters (C0, DEL, C1) and surrogates: no identity holds them, and no database
# stores NUL or a lone surrogate.
_NOT_IN_IDENTITIES = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


class AuthenticationFailed(OmniForgeError):
    """The request carries no usable credentials; `reason` is safe to show the caller."""

    def __init__(self, reason: str, *, token_given: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.token_given = token_given


class TokenVerifier:
    """Verifies bearer tokens and returns who is calling.

    The token's `alg` header only chooses between the configured paths, each verified with
    that one algorithm:

    - `HS256` with `secret` (no secret: refused);
    - one of `algorithms` with the key named by `kid` in `jwks` (no JWKS: refused);
    - anything else is refused as "the token's algorithm is not accepted".

    On both paths `iss` and `aud` are required and checked when `issuer` / `audience` are
    set: a deployment that names its issuer and audience accepts no token, of either kind,
    minted for another (`mint_token` takes them).

    Every token needs `exp`; `nbf` and `iat` are checked when present, all with `leeway_s`.
    `sub` must be a non-empty string of at most 255 characters, the `tenant_claim` one of at
    most 64; `roles_claim` may be a list of strings (at most 64 characters each) or a
    space-separated string, or be missing (no roles). No identity claim may hold control
    characters or surrogates. Claim names are looked up as is first, then as a dotted path into
    nested objects (`realm_access.roles`), so namespaced names such as
    `https://example.com/tenant` work as well.

    The verifier owns `jwks`: `aclose()` closes it.
    """

    def __init__(
        self,
        secret: str | None,
        *,
        leeway_s: float = 30.0,
        jwks: "JWKSClient | None" = None,
        issuer: str | None = None,
        audience: str | None = None,
        algorithms: Sequence[str] = ("RS256", "ES256"),
        tenant_claim: str = "tenant_id",
        roles_claim: str = "roles",
        clock: Callable[[], float] = time.time,
    ) -> None:
        if secret == "":
            raise ValueError("an empty JWT secret verifies nothing")
        if secret is None and jwks is None:
            raise ValueError("a JWT secret, a JWKS or both are needed to verify tokens")
        if issuer == "" or audience == "":
            raise ValueError("an empty issuer or audience checks nothing")
        if not tenant_claim or not roles_claim:
            raise ValueError("the tenant and roles claim names must not be empty")
        if jwks is not None:
            unsupported = set(algorithms) - jwks.ALGORITHMS
            if unsupported:
                raise ValueError(f"not an asymmetric algorithm: {', '.join(sorted(unsupported))}")
        self._secret = secret
        self._leeway = timedelta(seconds=leeway_s)
        self._verified: dict[str, tuple[float, Principal]] = {}
        self._clock = clock  # wall time, as the tokens' claims and PyJWT's checks use
        self._jwks = jwks
        self._issuer = issuer
        self._audience = audience
        self._algorithms = frozenset(algorithms)
        self._tenant_claim = tenant_claim
        self._roles_claim = roles_claim

    @classmethod
    def from_settings(cls, settings: Settings) -> Self:
        """The verifier the settings describe: HS256 with `settings.hs256_secret()` (none when
        production runs on the JWKS alone), and the JWKS at `jwt_jwks_url` if set. Fetches
        nothing yet."""
        # Imported here: jwks.py raises this module's AuthenticationFailed.
        from app.security.jwks import JWKSClient

        jwks = None
        if settings.jwt_jwks_url:
            jwks = JWKSClient(
                settings.jwt_jwks_url,
                cache_s=settings.jwt_jwks_cache_s,
                refresh_cooldown_s=settings.jwt_jwks_refresh_cooldown_s,
            )
            if not settings.jwt_issuer or not settings.jwt_audience:
                logger.warning(
                    "JWKS tokens are accepted without an issuer and audience check: any token "
                    "the identity provider issues, for any application, is accepted"
                )
        return cls(
            settings.hs256_secret(),
            leeway_s=settings.jwt_leeway_s,
            jwks=jwks,
            issuer=settings.jwt_issuer or None,
            audience=settings.jwt_audience or None,
            algorithms=tuple(settings.jwt_algorithms),
            tenant_claim=settings.jwt_tenant_claim,
            roles_claim=settings.jwt_roles_claim,
        )

    async def verify(self, token: str) -> Principal:
        """The token's principal; raises `AuthenticationFailed` with a reason for the caller.

        A token verified in the last `VERIFIED_TTL_S` is not verified again (a client sends
        the same one with each request; the signature check was ~3 % of a task's CPU) until
        it expires: only successes are kept, at most `VERIFIED_MAX` of them."""
        verified = self._verified.get(token)
        if verified is not None:
            until, principal = verified
            if self._clock() < until:
                return principal
            del self._verified[token]
        principal, expires_at = await self._verify(token)
        now = self._clock()
        until = min(now + VERIFIED_TTL_S, expires_at + self._leeway.total_seconds())
        if until > now:
            self._verified[token] = (until, principal)
            if len(self._verified) > VERIFIED_MAX:
                del self._verified[next(iter(self._verified))]
        return principal

    async def _verify(self, token: str) -> tuple[Principal, float]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as exc:
            raise AuthenticationFailed("the token is malformed") from exc
        algorithm = header.get("alg")
        key: str | jwt.PyJWK
        if algorithm == HS256 and self._secret is not None:
            key = self._secret
        elif (
            self._jwks is not None and isinstance(algorithm, str) and algorithm in self._algorithms
        ):
            key = await self._jwks.key(header.get("kid"), algorithm=algorithm)
        else:
            raise AuthenticationFailed("the token's algorithm is not accepted")
        claims = self._decode(token, key, algorithm)
        return self._principal(claims), float(claims["exp"])

    async def aclose(self) -> None:
        """Closes the JWKS client, if any."""
        if self._jwks is not None:
            await self._jwks.aclose()

    def _decode(self, token: str, key: str | jwt.PyJWK, algorithm: str) -> dict[str, Any]:
        issuer, audience = self._issuer, self._audience
        required = ["exp", "sub"]
        if issuer is not None:
            required.append("iss")
        if audience is not None:
            required.append("aud")
        try:
            return jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                leeway=self._leeway,
                issuer=issuer,
                audience=audience,
                options={
                    "require": required,
                    # Without a configured audience, a token's `aud` is not ours to judge
                    # (PyJWT would refuse every token carrying one).
                    "verify_aud": audience is not None,
                    # A weak key published by the identity provider is refused, not warned
                    # about on every request.
                    "enforce_minimum_key_length": isinstance(key, jwt.PyJWK),
                },
            )
        except jwt.ExpiredSignatureError as exc:
            raise AuthenticationFailed("the token has expired") from exc
        except jwt.ImmatureSignatureError as exc:
            raise AuthenticationFailed("the token is not valid yet") from exc
        except jwt.InvalidSignatureError as exc:
            raise AuthenticationFailed("the token's signature is invalid") from exc
        except jwt.MissingRequiredClaimError as exc:
            raise AuthenticationFailed(f"the token has no `{exc.claim}` claim") from exc
        except jwt.InvalidIssuerError as exc:
            raise AuthenticationFailed("the token's issuer is not accepted") from exc
        except jwt.InvalidAudienceError as exc:
            raise AuthenticationFailed("the token's audience is not accepted") from exc
        except jwt.InvalidAlgorithmError as exc:
            raise AuthenticationFailed("the token's algorithm is not accepted") from exc
        except jwt.InvalidKeyError as exc:
            raise AuthenticationFailed("the token's signing key is not accepted") from exc
        except jwt.InvalidTokenError as exc:
            raise AuthenticationFailed("the token is malformed") from exc

    def _principal(self, claims: Mapping[str, Any]) -> Principal:
        subject = _id_claim(claims, "sub", _MAX_SUBJECT_CHARS)
        tenant_id = _id_claim(claims, self._tenant_claim, _MAX_TENANT_CHARS)
        roles = _claim(claims, self._roles_claim)
        if roles is None:
            roles = []
        elif isinstance(roles, str):
            roles = roles.split()
        if not isinstance(roles, list) or not all(isinstance(role, str) for role in roles):
            raise AuthenticationFailed(
                f"the token's `{self._roles_claim}` claim must be a list of strings"
            )
        if not all(_is_identity(role, _MAX_ROLE_CHARS) for role in roles):
            raise AuthenticationFailed(
                f"the token's `{self._roles_claim}` claim holds a role of control characters "
                f"or longer than {_MAX_ROLE_CHARS} characters"
            )
        return Principal(subject=subject, tenant_id=tenant_id, roles=frozenset(roles))


def _claim(claims: Mapping[str, Any], name: str) -> Any:
    """The claim called `name`, else the value at the dotted path `name`, else None."""
    if name in claims:
        return claims[name]
    value: Any = claims
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _id_claim(claims: Mapping[str, Any], name: str, max_chars: int) -> str:
    value = _claim(claims, name)
    if value is None:
        raise AuthenticationFailed(f"the token has no `{name}` claim")
    if not isinstance(value, str) or not value or len(value) > max_chars:
        raise AuthenticationFailed(f"the token's `{name}` claim must be a non-empty string")
    if not _is_identity(value, max_chars):
        raise AuthenticationFailed(f"the token's `{name}` claim holds control characters")
    return value


def _is_identity(value: Any, max_chars: int) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= max_chars
        and _NOT_IN_IDENTITIES.search(value) is None
    )


def mint_token(
    secret: str,
    *,
    tenant_id: str,
    subject: str,
    roles: Sequence[str],
    ttl: timedelta = timedelta(hours=1),
    now: datetime | None = None,
    issuer: str | None = None,
    audience: str | None = None,
) -> str:
    """An HS256 token for local use and tests; with `iss` and `aud` when given (a verifier
    with an issuer and audience requires them)."""
    issued = now or datetime.now(UTC)
    claims: dict[str, Any] = {
        "sub": subject,
        "tenant_id": tenant_id,
        "roles": list(roles),
        "iat": issued,
        "nbf": issued,
        "exp": issued + ttl,
    }
    if issuer is not None:
        claims["iss"] = issuer
    if audience is not None:
        claims["aud"] = audience
    return jwt.encode(claims, secret, algorithm=HS256)
