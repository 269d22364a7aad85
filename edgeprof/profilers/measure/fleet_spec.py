"""A fleet's scheduler and how to reach it safely: :class:`FleetSpec` (address, TLS, the
loopback rule, the Dask client) and the names every side of the fleet shares (the
environment variables, the backend resource). Part of the fleet
(:mod:`edgeprof.profilers.measure.fleet`, whose docstring describes the whole);
``distributed`` is imported inside the functions that use it."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from edgeprof.core.errors import UserError

#: the scheduler address when ``--fleet`` is not given
FLEET_ENV = "EDGEPROF_FLEET"
#: TLS files and the explicit opt-out, for commands that take ``--fleet`` (profile, sweep)
TLS_ENV = {"tls_ca": "EDGEPROF_FLEET_TLS_CA", "tls_cert": "EDGEPROF_FLEET_TLS_CERT",
           "tls_key": "EDGEPROF_FLEET_TLS_KEY"}
INSECURE_ENV = "EDGEPROF_FLEET_INSECURE"
#: resource that routes a job to a worker that can run a backend
BACKEND_RESOURCE = "backend:{}"


# ------------------------------------------------------------------ address and TLS
@dataclass(frozen=True)
class FleetSpec:
    """Where the scheduler is and how to reach it safely."""

    address: str
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    insecure: bool = False

    @classmethod
    def from_options(cls, address: str | None = None, *, tls_ca: str | None = None,
                     tls_cert: str | None = None, tls_key: str | None = None,
                     insecure: bool | None = None) -> FleetSpec | None:
        """From explicit values, falling back on ``$EDGEPROF_FLEET`` and the TLS variables;
        None when no scheduler is named anywhere."""
        address = address or os.environ.get(FLEET_ENV)
        if not address:
            return None
        env = {k: os.environ.get(v) or None for k, v in TLS_ENV.items()}
        if insecure is None:
            insecure = os.environ.get(INSECURE_ENV, "").lower() in ("1", "true", "yes")
        spec = cls(address.strip(), tls_ca or env["tls_ca"], tls_cert or env["tls_cert"],
                   tls_key or env["tls_key"], bool(insecure))
        spec.check()
        return spec

    @property
    def host(self) -> str:
        rest = self.address.split("://", 1)[-1]
        if rest.startswith("["):  # [::1]:8786
            return rest[1:].split("]", 1)[0]
        return rest.rsplit(":", 1)[0] if rest.count(":") == 1 else rest

    @property
    def tls(self) -> bool:
        return bool(self.tls_ca or self.tls_cert or self.tls_key)

    @property
    def loopback(self) -> bool:
        host = self.host
        if host in ("localhost", "localhost.localdomain"):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    def check(self) -> None:
        """Refuse what would be unsafe or cannot work, before connecting."""
        scheme = self.address.split("://", 1)[0] if "://" in self.address else "tcp"
        if scheme not in ("tcp", "tls"):
            raise UserError(f"scheduler address '{self.address}' must be HOST:PORT, "
                            "tcp://HOST:PORT or tls://HOST:PORT")
        if self.tls:
            missing = [f"--tls-{n}" for n, v in (("ca", self.tls_ca), ("cert", self.tls_cert),
                                                 ("key", self.tls_key)) if not v]
            if missing:
                raise UserError(f"TLS needs a CA, a certificate and a key: give "
                                f"{', '.join(missing)} too")
            for v in (self.tls_ca, self.tls_cert, self.tls_key):
                if not Path(v).is_file():
                    raise UserError(f"TLS file '{v}' does not exist")
            return
        if scheme == "tls":
            raise UserError(f"scheduler '{self.address}' speaks TLS: give --tls-ca, --tls-cert "
                            "and --tls-key")
        if not self.loopback and not self.insecure:
            raise UserError(
                f"scheduler '{self.address}' is beyond loopback and no TLS was given: Dask runs "
                "pickled functions from the scheduler, so give --tls-ca, --tls-cert and "
                "--tls-key (or $EDGEPROF_FLEET_TLS_*), or --insecure on a network you trust")

    @property
    def url(self) -> str:
        rest = self.address.split("://", 1)[-1]
        return f"{'tls' if self.tls else 'tcp'}://{rest}"

    def security(self):
        """``distributed.security.Security`` for TLS, or None."""
        if not self.tls:
            return None
        from distributed.security import Security

        return Security(tls_ca_file=self.tls_ca, tls_client_cert=self.tls_cert,
                        tls_client_key=self.tls_key, tls_worker_cert=self.tls_cert,
                        tls_worker_key=self.tls_key, require_encryption=True)

    def connect(self, timeout_s: float = 10.0):
        """A ``distributed.Client`` on the scheduler; a one-line error when it cannot."""
        from distributed import Client

        try:
            return Client(self.url, security=self.security(), timeout=timeout_s,
                          set_as_default=False)
        except (OSError, TimeoutError) as e:
            raise UserError(f"cannot reach the scheduler at {self.url} ({one_line(e)}); is "
                            "'dask scheduler' running there, and the port open?") from None


def one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200]}" if text else type(e).__name__
