"""The client config file that ``ringctl`` reads too (``cli/config.h``).

Where the scheduler is and which CA to trust, so that a new shell needs no exports. YAML with
these keys, all optional::

    scheduler: 127.0.0.1:7070
    tls_ca: /tmp/ringmaster-quickstart/certs/ca.crt
    tls_cert: ...
    tls_key: ...
    insecure: false

The file is ``$RINGMASTER_CONFIG``, else ``${XDG_CONFIG_HOME:-~/.config}/ringmaster/config``;
``scripts/quickstart`` writes it. A relative path is taken from the file's directory. Each
setting counts only where neither the argument nor the environment gives it.
"""

from __future__ import annotations

import dataclasses
import errno
import os
from typing import Optional

__all__ = ["ClientConfig", "CONFIG_ENV", "config_path", "load_config", "parse_config"]

#: The environment variable that names the config file.
CONFIG_ENV = "RINGMASTER_CONFIG"

_KEYS = ("scheduler", "tls_ca", "tls_cert", "tls_key", "insecure")


@dataclasses.dataclass(frozen=True)
class ClientConfig:
    """The settings of one config file; None where the file says nothing."""

    path: str
    scheduler: Optional[str] = None
    tls_ca: Optional[str] = None
    tls_cert: Optional[str] = None
    tls_key: Optional[str] = None
    insecure: Optional[bool] = None


def config_path() -> Optional[str]:
    """The config file's path by the order above; None when no variable gives one."""
    named = os.environ.get(CONFIG_ENV)
    if named:
        return named
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg:
        return os.path.join(xdg, "ringmaster", "config")
    home = os.environ.get("HOME")
    if home:
        return os.path.join(home, ".config", "ringmaster", "config")
    return None


def parse_config(text: str, path: str) -> ClientConfig:
    """Parses the text of the config file at ``path``; ValueError names the file and key."""
    import yaml  # Debian's python3-yaml, as for spec files

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError(f"config file {path}: {e}") from None
    if data is None:
        return ClientConfig(path=path)
    if not isinstance(data, dict):
        raise ValueError(f"config file {path}: expected a mapping of {', '.join(_KEYS)}")
    values = {}
    for key, value in data.items():
        if key not in _KEYS:
            raise ValueError(
                f"config file {path}: unknown key {key!r} (allowed: {', '.join(_KEYS)})"
            )
        if key == "insecure":
            if not isinstance(value, bool):
                raise ValueError(
                    f"config file {path}: insecure: expected true or false, got {value!r}"
                )
            values[key] = value
            continue
        if isinstance(value, (dict, list)):
            raise ValueError(f"config file {path}: {key}: expected a single value")
        value = "" if value is None else str(value)
        if not value:
            raise ValueError(f"config file {path}: {key}: must not be empty")
        if key != "scheduler" and not value.startswith("/"):
            value = os.path.join(os.path.dirname(path) or ".", value)
        values[key] = value
    return ClientConfig(path=path, **values)


def load_config() -> Optional[ClientConfig]:
    """Reads the config file; None when there is none at the default path.

    Raises FileNotFoundError when ``$RINGMASTER_CONFIG`` names a file that cannot be read,
    ValueError when the file is malformed.
    """
    path = config_path()
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        if not os.environ.get(CONFIG_ENV) and e.errno == errno.ENOENT:
            return None
        raise FileNotFoundError(
            f"config file {path} cannot be read: {e.strerror}"
            + (f" (named by {CONFIG_ENV})" if os.environ.get(CONFIG_ENV) else "")
        ) from None
    return parse_config(text, path)
