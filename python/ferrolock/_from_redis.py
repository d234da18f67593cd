"""``Client.from_redis``: the URL and options of a ferrolock ``Client`` for
the same deployment as a redis-py client (``redis.Redis``,
``redis.asyncio.Redis``, a ``ConnectionPool`` of either, a client made by
``Sentinel(...).master_for(...)``, or a ``RedisCluster``).

Each setting of the redis-py client's connections is carried over (the
server or socket, database, credentials, timeouts, TLS files and checks,
client name, TCP keepalive), left behind when it only shapes redis-py's own
connections or replies (decoding, retries, health checks, pool size,
protocol, and the handlers redis-py keeps beside them), or refused with a
``ValueError`` naming it when ferrolock cannot do the same (a credential
provider, a connect callback, a password-protected key, CA data in memory,
any TLS setting it does not know, ...). The URL built is read by the core like any other, so a value
it refuses is refused there, by name.
"""

from __future__ import annotations

import ssl
from typing import Any
from urllib.parse import quote, urlencode

# Settings that only shape redis-py's own connections or replies: nothing of
# ferrolock's depends on them.
IGNORED = frozenset(
    {
        "encoding",
        "encoding_errors",
        "decode_responses",
        "socket_read_size",
        "retry",
        "retry_on_error",
        "retry_on_timeout",
        "health_check_interval",
        "driver_info",
        "lib_name",
        "lib_version",
        "protocol",
        "legacy_responses",
        "socket_keepalive_options",
        "socket_type",
        "himport_registry",
        "maint_notifications_pool_handler",
        "maint_notifications_config",
        "orig_host_address",
        "orig_socket_timeout",
        "orig_socket_connect_timeout",
        "connection_pool",
        "parser_class",
        "command_packer",
        "event_dispatcher",
        "cache",
        "cache_config",
        "single_connection_client",
        "max_connections",
        "ssl",
    }
)

# Settings ferrolock cannot do the same with, and what to do instead.
REFUSED = {
    "credential_provider": "ferrolock takes a fixed username and password: give them to the redis-py client "
    "(username=, password=) or pass a URL to ferrolock.Client",
    "redis_connect_func": "ferrolock runs no callback on connect",
    "ssl_password": "an encrypted private key is not supported: give ssl_keyfile unencrypted",
    "ssl_ca_data": "give the certificate authorities as a PEM file (ssl_ca_certs=)",
    "ssl_ca_path": "give the certificate authorities as one PEM file (ssl_ca_certs=)",
    "ssl_ciphers": "ferrolock uses rustls's safe default cipher suites",
    "ssl_min_version": "ferrolock uses TLS 1.2 or 1.3, whichever the server offers",
    "ssl_include_verify_flags": "ferrolock's certificate checks are rustls's, with no OpenSSL flags",
    "ssl_exclude_verify_flags": "ferrolock's certificate checks are rustls's, with no OpenSSL flags",
    "ssl_validate_ocsp": "ferrolock does not check OCSP",
    "ssl_validate_ocsp_stapled": "ferrolock does not check OCSP",
    "ssl_ocsp_context": "ferrolock does not check OCSP",
    "ssl_ocsp_expected_cert": "ferrolock does not check OCSP",
}

CARRIED = frozenset(
    {
        "host",
        "port",
        "path",
        "db",
        "username",
        "password",
        "socket_timeout",
        "socket_connect_timeout",
        "client_name",
        "socket_keepalive",
        "ssl_ca_certs",
        "ssl_certfile",
        "ssl_keyfile",
        "ssl_cert_reqs",
        "ssl_check_hostname",
    }
)


def _refuse(what: str, why: str) -> ValueError:
    return ValueError(f"Client.from_redis cannot carry over {what}: {why}")


def _check(kwargs: dict[str, Any], where: str) -> None:
    """Refuses what cannot be carried over: the settings of ``REFUSED`` and
    any other TLS setting, when given. Other keys redis-py keeps beside its
    settings (handlers, registries of its own) shape only its connections."""
    for key, value in kwargs.items():
        if key in CARRIED or key in IGNORED or value is None or value is False:
            continue
        if key in REFUSED or key.startswith("ssl"):
            why = REFUSED.get(key, "ferrolock does not know this TLS setting")
            raise _refuse(f"{key}={value!r} of {where}", why)


def _cert_reqs(value: Any) -> str | None:
    """``ssl_cert_reqs`` as the URL's query says it: ``none``, or ``None`` for a checked certificate."""
    if value in (ssl.CERT_NONE, "none", "CERT_NONE"):
        return "none"
    return None


def _timeouts(kwargs: dict[str, Any]) -> dict[str, float]:
    """redis-py's socket timeouts as ferrolock's keywords (``None``: ferrolock's default)."""
    out = {}
    for key, option in (("socket_connect_timeout", "connect_timeout"), ("socket_timeout", "command_timeout")):
        if kwargs.get(key) is not None:
            out[option] = float(kwargs[key])
    return out


def _auth(kwargs: dict[str, Any]) -> str:
    user, password = kwargs.get("username"), kwargs.get("password")
    if password is None and user is None:
        return ""
    return f"{quote(str(user or ''), safe='')}:{quote(str(password or ''), safe='')}@"


def _is_tls(connection_class: type, kwargs: dict[str, Any]) -> bool:
    return "SSL" in connection_class.__name__ or any(
        k.startswith("ssl_") and v for k, v in kwargs.items() if k not in ("ssl_check_hostname", "ssl_cert_reqs")
    )


def _tls_query(kwargs: dict[str, Any]) -> dict[str, str]:
    """The ``ssl_*`` settings as the URL's query takes them (ca_file excepted, a keyword)."""
    query = {}
    if kwargs.get("ssl_certfile") or kwargs.get("ssl_keyfile"):
        query["ssl_certfile"] = str(kwargs.get("ssl_certfile") or "")
        query["ssl_keyfile"] = str(kwargs.get("ssl_keyfile") or "")
    if _cert_reqs(kwargs.get("ssl_cert_reqs")):
        query["ssl_cert_reqs"] = "none"
    elif kwargs.get("ssl_check_hostname") is False:
        query["ssl_check_hostname"] = "false"
    return query


def _pool_url(pool: Any) -> tuple[str, dict[str, Any]]:
    """The URL and keywords of a plain (not Sentinel) connection pool."""
    kwargs = dict(pool.connection_kwargs)
    _check(kwargs, "the redis-py connection")
    options: dict[str, Any] = _timeouts(kwargs)
    query: dict[str, str] = {}
    db = int(kwargs.get("db") or 0)
    if kwargs.get("client_name"):
        query["client_name"] = str(kwargs["client_name"])
    if kwargs.get("socket_keepalive"):
        query["socket_keepalive"] = "true"
    if kwargs.get("path"):
        for key in ("username", "password"):
            if kwargs.get(key) is not None:
                query[key] = str(kwargs[key])
        query["db"] = str(db)
        return f"unix://{quote(str(kwargs['path']))}?{urlencode(query)}", options
    host, port = kwargs.get("host") or "localhost", int(kwargs.get("port") or 6379)
    scheme = "redis"
    if _is_tls(pool.connection_class, kwargs):
        scheme = "rediss"
        query.update(_tls_query(kwargs))
        if kwargs.get("ssl_ca_certs"):
            options["ca_file"] = str(kwargs["ssl_ca_certs"])
    host = f"[{host}]" if ":" in host else host
    url = f"{scheme}://{_auth(kwargs)}{host}:{port}/{db}"
    return (f"{url}?{urlencode(query)}" if query else url), options


def _sentinel_url(pool: Any) -> tuple[str, dict[str, Any]]:
    """The URL and keywords of a ``SentinelConnectionPool`` (``master_for``)."""
    if not getattr(pool, "is_master", True):
        raise _refuse("a replica's client (Sentinel.slave_for)", "locks are taken on the master: use master_for")
    kwargs = {k: v for k, v in pool.connection_kwargs.items()}
    _check(kwargs, "the Sentinel-managed connection")
    manager = pool.sentinel_manager
    sentinels = [s.connection_pool for s in manager.sentinels]
    sentinel_kwargs = [dict(s.connection_kwargs) for s in sentinels]
    for kw in sentinel_kwargs:
        _check(kw, "a Sentinel's connection")
    data_tls = _is_tls(pool.connection_class, kwargs) or bool(kwargs.get("ssl"))
    sentinel_tls = {_is_tls(s.connection_class, kw) for s, kw in zip(sentinels, sentinel_kwargs)}
    if sentinel_tls != {data_tls}:
        raise _refuse(
            "TLS to some of the Sentinels or data nodes and not to others",
            "rediss+sentinel:// speaks TLS to both, redis+sentinel:// to neither",
        )
    options: dict[str, Any] = _timeouts(kwargs)
    if data_tls:
        for kw in [kwargs, *sentinel_kwargs]:
            if _tls_query(kw):
                raise _refuse(
                    "a client certificate or unchecked certificates through Sentinel",
                    "rediss+sentinel:// checks every certificate against ca_file",
                )
        cas = {kw.get("ssl_ca_certs") for kw in [kwargs, *sentinel_kwargs]} - {None}
        if len(cas) > 1:
            raise _refuse("different ssl_ca_certs for the Sentinels and the data nodes", "one ca_file serves both")
        if cas:
            options["ca_file"] = str(cas.pop())
    query: dict[str, str] = {}
    users = {(kw.get("username"), kw.get("password")) for kw in sentinel_kwargs}
    if len(users) > 1:
        raise _refuse("different credentials for each Sentinel", "one sentinel_username / sentinel_password")
    ((s_user, s_password),) = users or {(None, None)}
    if s_user is not None:
        query["sentinel_username"] = str(s_user)
    if s_password is not None:
        query["sentinel_password"] = str(s_password)
    if kwargs.get("client_name"):
        query["client_name"] = str(kwargs["client_name"])
    hosts = ",".join(f"{kw.get('host') or 'localhost'}:{int(kw.get('port') or 26379)}" for kw in sentinel_kwargs)
    scheme = "rediss+sentinel" if data_tls else "redis+sentinel"
    url = f"{scheme}://{_auth(kwargs)}{hosts}/{quote(pool.service_name, safe='')}/{int(kwargs.get('db') or 0)}"
    return (f"{url}?{urlencode(query)}" if query else url), options


def _cluster_url(cluster: Any) -> tuple[str, dict[str, Any]]:
    """The URL and keywords of a ``RedisCluster`` (sync or asyncio)."""
    manager = cluster.nodes_manager
    kwargs = dict(getattr(manager, "connection_kwargs", None) or {})
    if getattr(kwargs.get("redis_connect_func"), "__self__", None) is cluster:
        del kwargs["redis_connect_func"]  # the RedisCluster's own, which runs the user's (kept apart)
    if getattr(cluster, "user_on_connect_func", None) is not None:
        raise _refuse("redis_connect_func of a RedisCluster", REFUSED["redis_connect_func"])
    _check(kwargs, "the RedisCluster's connections")
    for key in ("client_name", "ssl_certfile", "ssl_keyfile"):
        if kwargs.get(key):
            raise _refuse(
                f"{key} of a RedisCluster", "a redis+cluster:// client takes the timeouts and ssl_ca_certs only"
            )
    if _cert_reqs(kwargs.get("ssl_cert_reqs")) or kwargs.get("ssl_check_hostname") is False:
        raise _refuse("unchecked certificates of a RedisCluster", "rediss+cluster:// checks every certificate")
    nodes = list(getattr(manager, "startup_nodes", {}).values()) or [
        n for n in cluster.get_nodes() if getattr(n, "server_type", "primary") == "primary"
    ]
    if not nodes:
        raise _refuse("a RedisCluster with no known node", "give it startup_nodes")
    tls = bool(kwargs.get("ssl")) or _is_tls(kwargs.get("connection_class", type(None)), kwargs)
    options: dict[str, Any] = _timeouts(kwargs)
    if tls and kwargs.get("ssl_ca_certs"):
        options["ca_file"] = str(kwargs["ssl_ca_certs"])
    hosts = ",".join(f"{n.host}:{n.port}" for n in nodes)
    return f"{'rediss' if tls else 'redis'}+cluster://{_auth(kwargs)}{hosts}", options


def url_and_options(source: Any) -> tuple[str, dict[str, Any]]:
    """The ``Client`` URL and keywords for the deployment ``source`` (a
    redis-py client or connection pool) connects to."""
    if hasattr(source, "nodes_manager"):
        return _cluster_url(source)
    pool = getattr(source, "connection_pool", source)
    if hasattr(pool, "sentinel_manager") and hasattr(pool, "service_name"):
        return _sentinel_url(pool)
    if hasattr(pool, "connection_kwargs") and hasattr(pool, "connection_class"):
        return _pool_url(pool)
    raise TypeError(
        "Client.from_redis takes a redis-py client or connection pool (redis.Redis, redis.asyncio.Redis, "
        f"a ConnectionPool, a Sentinel's master_for client, a RedisCluster), got {type(source).__name__}"
    )
