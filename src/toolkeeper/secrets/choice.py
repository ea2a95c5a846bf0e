"""Which secrets backend a gateway opens when its caller names none: the one rule that
``toolkeeper serve`` and every CLI command share, so a CLI call resolves the tenant
credentials (and signs the webhooks) the server would.

1. the backend given (``--secrets-backend``), else ``TOOLKEEPER_SECRETS_BACKEND``; its key
   file given, else ``TOOLKEEPER_SECRETS_KEY_FILE`` (``TOOLKEEPER_SECRETS_KEY`` wins over
   any file when the embedded store loads its key);
2. else, with a config file, the file's ``secrets:`` decides (it may configure none);
3. else, for ``serve --demo``: the embedded store, under ``toolkeeper-secrets.key`` in the
   working directory (generated once, mode 0600) unless a key is configured;
4. else, next to a ``serve --demo`` store (that key file here, no key configured
   otherwise): the embedded store under it, as the demo server opened it;
5. else none: tenants' credentials cannot be resolved.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from toolkeeper.secrets.embedded import (
    DEMO_KEY_FILE,
    KEY_ENV,
    KEY_FILE_ENV,
    demo_key_file,
    generate_key_file,
)

BACKEND_ENV = "TOOLKEEPER_SECRETS_BACKEND"


def secrets_choice(backend: str | None = None, key_file: str | Path | None = None, *,
                   config: bool = False, demo: bool = False,
                   environ: Mapping[str, str] | None = None) -> tuple[str | None, Path | None]:
    """The backend (``None``: the config file decides, or there is none) and the master key
    file to open, by the rule in the module docstring. ``config``: a config file is given;
    ``demo``: ``serve --demo`` (may create the demo's key file)."""
    env = os.environ if environ is None else environ
    backend = backend or env.get(BACKEND_ENV) or None
    path = Path(key_file) if key_file is not None else (
        Path(env[KEY_FILE_ENV]) if env.get(KEY_FILE_ENV) else None)
    if backend is not None or config:
        return backend, path
    if demo:
        if path is None and not env.get(KEY_ENV):
            path = DEMO_KEY_FILE.resolve()
            if not path.exists():
                generate_key_file(path)
        return "embedded", path
    found = demo_key_file(env) if path is None else None
    return ("embedded", found) if found is not None else (None, path)
