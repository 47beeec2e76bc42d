"""CURVE keys for a worker: the coordinator's public key and the worker's own pair, as Z85 text
(what ``aclaimctl keys generate`` writes)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Mapping, Optional

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
        return cls.from_secret(_read_key(server_public_file, "the coordinator's public key"),
                               read_secret_key_file(client_secret_file))

    @classmethod
    def from_secret_file(cls, server_public: str, client_secret_file: str) -> "CurveKeys":
        """Keys from the coordinator's public key (text) and the worker's secret key file, as
        ``aclaim-worker --curve-server-key K --curve-secret-key-file F`` takes them."""
        return cls.from_secret(server_public, read_secret_key_file(client_secret_file))

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> Optional["CurveKeys"]:
        """Keys from the variables ``aclaim-worker`` reads: ``ACLAIM_CURVE_SERVER_KEY`` (the
        coordinator's public key, text) or ``ACLAIM_CURVE_SERVER_KEY_FILE``, and
        ``ACLAIM_CURVE_SECRET_KEY_FILE``. None when neither server variable is set (plaintext).
        The secret key is taken from a file only: a key in a variable or an argument is visible to
        more than the process that needs it."""
        env = os.environ if environ is None else environ
        server = env.get("ACLAIM_CURVE_SERVER_KEY", "")
        server_file = env.get("ACLAIM_CURVE_SERVER_KEY_FILE", "")
        if not server and not server_file:
            return None
        if server and server_file:
            raise ValueError("set ACLAIM_CURVE_SERVER_KEY or ACLAIM_CURVE_SERVER_KEY_FILE, "
                             "not both")
        secret_file = env.get("ACLAIM_CURVE_SECRET_KEY_FILE", "")
        if not secret_file:
            raise ValueError("CURVE needs the worker's secret key in a file: set "
                             "ACLAIM_CURVE_SECRET_KEY_FILE (mode 0600)")
        if server_file:
            server = _read_key(server_file, "the coordinator's public key")
        return cls.from_secret_file(server, secret_file)


def read_secret_key_file(path: str) -> str:
    """The secret key in ``path``: its first line, from a regular file that neither its group nor
    others may read (ValueError otherwise, naming the file and its mode). The mode is read from
    the open file, so the file checked is the file read."""
    what = "the worker's secret key"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise ValueError(f"cannot read {what} from {path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path} is not a regular file")
        if st.st_mode & 0o077:
            raise ValueError(f"{path} is readable by its group or others (mode "
                             f"{stat.S_IMODE(st.st_mode):04o}); chmod 600 it")
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    try:
        return data.decode("ascii").split("\n", 1)[0].strip()
    except UnicodeDecodeError:
        raise ValueError(f"{what} in {path} is not Z85 text") from None
