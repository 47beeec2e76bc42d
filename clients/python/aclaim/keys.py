"""CURVE keys for a worker: the coordinator's public key and the worker's own pair, as Z85 text
(what ``aclaimctl keys generate`` writes)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import zmq
from zmq.utils import z85

_Z85_KEY_LENGTH = 40


def _check_key(what: str, key: str) -> str:
    if len(key) != _Z85_KEY_LENGTH:
        raise ValueError(f"{what} must be a {_Z85_KEY_LENGTH}-character Z85 key, got "
                         f"{len(key)} characters")
    try:
        z85.decode(key.encode("ascii"))
    except (ValueError, UnicodeEncodeError, KeyError, IndexError) as e:
        raise ValueError(f"{what} is not Z85 text: {e}") from None
    return key


def _read_key(path: str, what: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except OSError as e:
        raise ValueError(f"cannot read {what} from {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{what} in {path} is not Z85 text") from None


@dataclass(frozen=True)
class CurveKeys:
    """The keys a worker authenticates with under CURVE. The coordinator takes the worker's
    organization from the registered public key (``aclaimctl keys register``), and the worker's
    HELLO must name the worker the key was registered as."""

    server_public: str
    client_public: str
    client_secret: str

    def __post_init__(self) -> None:
        _check_key("the coordinator's public key", self.server_public)
        _check_key("the worker's public key", self.client_public)
        _check_key("the worker's secret key", self.client_secret)
        if zmq.curve_public(self.client_secret.encode("ascii")).decode("ascii") != \
                self.client_public:
            raise ValueError("the worker's public key is not the one of its secret key")

    @classmethod
    def from_secret(cls, server_public: str, client_secret: str) -> "CurveKeys":
        """Keys from the coordinator's public key and the worker's secret key (its public key is
        derived from the secret)."""
        secret = _check_key("the worker's secret key", client_secret.strip())
        public = zmq.curve_public(secret.encode("ascii")).decode("ascii")
        return cls(_check_key("the coordinator's public key", server_public.strip()), public,
                   secret)

    @classmethod
    def from_files(cls, server_public_file: str, client_secret_file: str) -> "CurveKeys":
        """Keys from the files ``aclaimctl keys generate`` wrote: the coordinator's
        ``coordinator.pub`` and the worker's ``NAME.key`` (mode 0600)."""
        mode = os.stat(client_secret_file).st_mode if os.path.exists(client_secret_file) else 0
        if mode & 0o077:
            raise ValueError(f"{client_secret_file} is readable by others (mode "
                             f"{mode & 0o777:o}); chmod 600 it")
        return cls.from_secret(_read_key(server_public_file, "the coordinator's public key"),
                               _read_key(client_secret_file, "the worker's secret key"))
