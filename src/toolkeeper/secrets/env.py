"""Secrets from environment variables: the zero-setup store for one machine or a container.

Mapping from ``(connector, key)`` to a variable name: each part is upper-cased and every
character that is not an ASCII letter or digit becomes ``_``; connector and key are joined
by ``__`` after the prefix. ``("github", "token")`` → ``TOOLKEEPER_SECRET_GITHUB__TOKEN``;
``("my-crm", "api.key")`` → ``TOOLKEEPER_SECRET_MY_CRM__API_KEY``; connector ``None`` →
``TOOLKEEPER_SECRET_TOKEN``. The mapping is lossy (``a-b`` and ``a_b`` name the same
variable), which is acceptable for names an operator chooses.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from toolkeeper.secrets.base import SecretNotFound

DEFAULT_PREFIX = "TOOLKEEPER_SECRET_"
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]")


def env_var_name(connector_id: str | None, key: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The environment variable that holds ``key`` of ``connector_id``."""
    name = _NON_ALNUM.sub("_", key).upper()
    if connector_id:
        name = f"{_NON_ALNUM.sub('_', connector_id).upper()}__{name}"
    return prefix + name


class EnvSecretsStore:
    """Reads secrets from ``environ`` at each use (so a rotated variable takes effect)."""

    def __init__(
        self, environ: Mapping[str, str] | None = None, prefix: str = DEFAULT_PREFIX
    ) -> None:
        self._environ: Mapping[str, str] = os.environ if environ is None else environ
        self._prefix = prefix

    async def get_secret(self, connector_id: str | None, key: str) -> str:
        """The variable's value; an unset or empty variable is ``SecretNotFound``."""
        value = self._environ.get(env_var_name(connector_id, key, self._prefix))
        if not value:
            raise SecretNotFound(connector_id, key)
        return value

    def known_values(self) -> frozenset[str]:
        """Values of every non-empty variable under the prefix."""
        return frozenset(
            value
            for name, value in self._environ.items()
            if name.startswith(self._prefix) and value
        )
